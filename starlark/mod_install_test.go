// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"errors"
	"strings"
	"testing"
)

func TestInstallCloudflaredFromAScript(t *testing.T) {
	e := newEnv(t)
	_, err := e.run(Options{}, `podmin.install.cloudflared(nodegroup = "edge")`)
	if err == nil || !strings.Contains(err.Error(), `podmin secret create tunnel-token --for cloudflared -n platform-cloudflared`) {
		t.Fatalf("install without a token: %v", err)
	}

	e = newEnv(t)
	_, err = e.run(Options{}, `podmin.uninstall.cloudflared(nodegroup = "edge")`)
	if !errors.Is(err, ErrNotConfirmed) {
		t.Fatalf("uninstall without confirm: %v", err)
	}
	e = newEnv(t)
	if _, err := e.run(Options{}, `print(podmin.uninstall.cloudflared(nodegroup = "edge", confirm = True))`); err != nil {
		t.Fatal(err)
	}
	if got := e.stdout.String(); got != "deletion(action = \"absent\", name = \"cloudflared\", nodegroup = \"edge\", planned = False)\n" {
		t.Fatalf("stdout %q", got)
	}
}
