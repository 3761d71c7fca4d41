// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecipesLock locks a local recipe repository, runs a script that
// loads from it, then edits the locked file: the run refuses it until the
// lock is refreshed.
func TestRecipesLock(t *testing.T) {
	c := newCLI(t)
	for _, d := range []string{"app", "platform"} {
		if err := os.MkdirAll(filepath.Join(c.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lib := c.script("platform/lib.star", "greeting = \"hello\"\n")
	c.script("app/podmin.star.lock", `{"recipes": {"platform": {"path": "../platform"}}}`)
	main := c.script("app/main.star", "load(\"@platform//lib.star\", \"greeting\")\nprint(greeting)\n")
	c.fails(5, `repository @platform in `+filepath.Join(c.root, "app", "podmin.star.lock")+` pins no content: run "podmin recipes lock"`, "run", main)

	out := c.ok("recipes", "lock", filepath.Join(c.root, "app"))
	if !strings.HasPrefix(out, "@platform: 1 files, sha256:") || !strings.Contains(out, ": pinned for the first time\n") || !strings.Contains(out, "wrote "+filepath.Join(c.root, "app", "podmin.star.lock")) {
		t.Fatalf("recipes lock: %q", out)
	}
	if out := c.ok("run", main); out != "hello\n" {
		t.Fatalf("run: %q", out)
	}
	if err := os.WriteFile(lib, []byte("greeting = \"pwned\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code := c.run("run", main)
	if code != 5 || !strings.Contains(errs, "@platform//lib.star") || !strings.Contains(errs, "the lock pins sha256:") || strings.Contains(errs, "pwned") {
		t.Fatalf("tampered run: exit %d %s", code, errs)
	}
	c.script("platform/extra.star", "x = 1\n")
	out = c.ok("recipes", "lock", filepath.Join(c.root, "app"))
	if !strings.Contains(out, "@platform: 2 files, sha256:") || !strings.Contains(out, "1 changed, 1 added, 0 removed since the previous lock (review them)\n  changed lib.star\n  added   extra.star\n") {
		t.Fatalf("relock does not say what changed:\n%s", out)
	}
	if out := c.ok("recipes", "lock", filepath.Join(c.root, "app")); !strings.Contains(out, ": unchanged\n") {
		t.Errorf("a lock without changes:\n%s", out)
	}
	if out := c.ok("run", main); out != "pwned\n" {
		t.Fatalf("relocked run: %q", out)
	}
	c.fails(1, "there is no podmin.star.lock in", "recipes", "lock", filepath.Join(c.root, "platform"))
}
