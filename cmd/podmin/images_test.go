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

func TestBuildPushPrintsOnlyTheReference(t *testing.T) {
	c := newCLI(t)
	bucket := c.connectLocal()
	dir := filepath.Join(c.root, "ctx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY app /app\nENTRYPOINT [\"/app\"]\n"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "app"), []byte("bin"), 0o755)

	out := c.ok("build", "-t", "hello:v1", "--platform", "linux/amd64", "--platform", "linux/arm64", dir)
	if !strings.HasPrefix(out, "registry.podmin.internal/apps/hello:v1\nsha256:") || !strings.Contains(out, "(linux/amd64, linux/arm64)") {
		t.Errorf("build output %q", out)
	}
	stdout, stderr, code := c.run("push", "hello:v1")
	if code != 0 || stdout != "registry.podmin.internal/apps/hello:v1\n" {
		t.Fatalf("push: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if strings.Contains(stderr, "pushing") {
		t.Errorf("progress lines went to a stderr that is not a terminal: %q", stderr)
	}
	if _, err := os.Stat(filepath.Join(bucket, "apps", "hello", "index.json")); err != nil {
		t.Errorf("no index.json in the bucket: %v", err)
	}
	var res struct {
		References []string `json:"references"`
		Uploaded   int      `json:"uploaded"`
	}
	if err := json.Unmarshal([]byte(c.ok("push", "hello:v1", "web:stable", "-o", "json")), &res); err != nil || res.References[0] != "registry.podmin.internal/apps/web:stable" || res.Uploaded == 0 {
		t.Errorf("push -o json = %+v, %v", res, err)
	}

	bad := writeFile(t, c.root, "bad", "FROM scratch\nRUN true\n")
	before := c.snapshot()
	c.fails(2, "mirror/ is reserved for setup-managed dependency images", "push", "hello:v1", "mirror/pause:3.10")
	c.fails(1, "RUN: not supported by podmin build", "build", "-t", "x:v1", "-f", bad, dir)
	c.fails(2, "accepts between 1 and 2 arg(s)", "push")
	c.unchanged(before)
}

func writeFile(t *testing.T, dir, name, content string) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
