// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The agent serves images from the bucket and never pulls from a
// registry: it must not link the registry client's Docker credential
// helpers and logger, which every node would download for nothing.
func TestAgentLinksNoRegistryLogin(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Skipf("go list -deps: %v: %s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/docker/", "github.com/sirupsen/logrus", "go-containerregistry/pkg/authn", "go-containerregistry/pkg/v1/remote"} {
			if strings.Contains(dep, banned) {
				t.Errorf("podmin-agent links %s", dep)
			}
		}
	}
}
