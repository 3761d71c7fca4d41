// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPreview(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	out := c.ok("preview", "-g", "workers")
	if !strings.Contains(out, "NodeGroup workers has no committed deployments") {
		t.Fatalf("empty preview:\n%s", out)
	}
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1", "--secret", "token")
	c.ok("deploy", "proxy", "-g", "edge", "--image", "proxy:v1")
	out = c.ok("preview", "-g", "workers")
	for _, want := range []string{"# /etc/podmin/manifests/web.yaml", "keys token at /var/run/podmin/local (values not shown)", "podmin.dev/revision: ", "kind: Pod"} {
		if !strings.Contains(out, want) {
			t.Errorf("preview lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "proxy") {
		t.Errorf("preview shows another NodeGroup's Pod:\n%s", out)
	}
	dir := filepath.Join(c.root, "rendered")
	var res struct {
		Files []struct{ File, Path, YAML string }
	}
	if err := json.Unmarshal([]byte(c.ok("preview", "-g", "workers", "--out", dir, "-o", "json")), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 1 || res.Files[0].File != "web.yaml" {
		t.Fatalf("json %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "web.yaml")); err != nil || string(b) != res.Files[0].YAML {
		t.Fatalf("written file: %v", err)
	}
	c.fails(2, `required flag(s) "nodegroup" not set`, "preview")
}
