// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import "testing"

func TestInstallCloudflaredNeedsTheTokenFirst(t *testing.T) {
	c := secretCLI(t)
	before := c.snapshot()
	c.fails(1, `store the token with "podmin secret create tunnel-token --for cloudflared -n platform-cloudflared --provider local"`,
		"install", "cloudflared", "-g", "edge")
	c.unchanged(before)
}

func TestUninstallCloudflaredNeedsConfirmation(t *testing.T) {
	c := secretCLI(t)
	before := c.snapshot()
	c.fails(4, "pass --yes (-y) to podmin uninstall cloudflared", "uninstall", "cloudflared", "-g", "edge")
	c.unchanged(before)
	if out := c.ok("uninstall", "cloudflared", "-g", "edge", "-y"); out != "cloudflared is not installed on edge: nothing was changed\n" {
		t.Fatalf("uninstall -y of nothing: %q", out)
	}
}
