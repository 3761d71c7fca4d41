// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	pstar "podmin.dev/podmin/starlark"
)

// gitCommit writes files into the git working tree dir (created and
// initialised when new), commits them and returns the commit.
func gitCommit(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	run := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		run("init", "-q")
	}
	for n, c := range files {
		writeFile(t, dir, n, c)
	}
	run("add", "-A")
	run("commit", "-q", "-m", "change")
	return run("rev-parse", "HEAD")
}

func readLockFile(t *testing.T, p string) (pstar.Lock, []byte) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var lk pstar.Lock
	if err := json.Unmarshal(data, &lk); err != nil {
		t.Fatal(err)
	}
	return lk, data
}

// TestRecipesUpdateReview adds a git repository by branch, moves the
// branch, and runs podmin recipes update: it shows the per-file diff and
// changes nothing without a confirmation or with --dry-run; with -y the
// lock pins the new commit and its digest, and a run loads it. A cached
// clone edited afterwards is still refused.
func TestRecipesUpdateReview(t *testing.T) {
	c := newCLI(t)
	repo := filepath.Join(c.root, "shared")
	first := gitCommit(t, repo, map[string]string{"lib.star": "def greet():\n    return \"hello\"\n"})
	app := filepath.Join(c.root, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	main := writeFile(t, app, "main.star", "load(\"@shared//lib.star\", \"greet\")\nprint(greet())\n")
	lockPath := filepath.Join(app, "podmin.star.lock")

	c.fails(4, "pass --yes (-y) to podmin recipes add", "recipes", "add", "shared", repo+"@main", "--dir", app)
	if _, err := os.Stat(lockPath); !os.IsNotExist(err) {
		t.Fatalf("an add that was not accepted wrote the lock: %v", err)
	}
	out := c.ok("recipes", "add", "shared", repo+"@main", "--dir", app, "-y")
	if !strings.Contains(out, "@shared: new: "+repo+" "+first+" (main), 1 file(s)\n") || !strings.Contains(out, "--- /dev/null\n+++ b/lib.star\n+def greet():\n") || !strings.Contains(out, "wrote "+lockPath) {
		t.Fatalf("recipes add:\n%s", out)
	}
	if out := c.ok("run", main); out != "hello\n" {
		t.Fatalf("run: %q", out)
	}

	second := gitCommit(t, repo, map[string]string{"lib.star": "def greet():\n    return \"hello, world\"\n", "extra.star": "x = 1\n"})
	_, before := readLockFile(t, lockPath)
	wantDiff := "@shared: " + first + " -> " + repo + " " + second + " (main), 2 file(s)\n" +
		"  digest "
	wantFiles := "  added   extra.star\n  changed lib.star\n--- /dev/null\n+++ b/extra.star\n+x = 1\n--- a/lib.star\n+++ b/lib.star\n def greet():\n-    return \"hello\"\n+    return \"hello, world\"\n"
	for _, args := range [][]string{
		{"recipes", "update", "--dir", app},
		{"recipes", "update", "shared", "--dir", app},
	} {
		out, errs, code := c.run(args...)
		if code != 4 || !strings.Contains(errs, "was not changed") || !strings.Contains(out, wantDiff) || !strings.Contains(out, wantFiles) {
			t.Fatalf("podmin %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
		}
	}
	out = c.ok("recipes", "update", "--dir", app, "--dry-run")
	if !strings.Contains(out, wantFiles) || !strings.Contains(out, "dry run: "+lockPath+" was not changed") {
		t.Fatalf("update --dry-run:\n%s", out)
	}
	if _, after := readLockFile(t, lockPath); string(after) != string(before) {
		t.Fatal("an update without a confirmation changed the lock")
	}
	if out := c.ok("run", main); out != "hello\n" {
		t.Fatalf("run before the update is accepted: %q", out)
	}

	out = c.ok("recipes", "update", "--dir", app, "-y")
	if !strings.Contains(out, wantFiles) || !strings.Contains(out, "wrote "+lockPath) {
		t.Fatalf("update -y:\n%s", out)
	}
	lk, _ := readLockFile(t, lockPath)
	e := lk.Recipes["shared"]
	if e.Commit != second || e.Ref != "main" || e.Digest != pstar.CommitDigest(second, e.Files) || len(e.Files) != 2 {
		t.Fatalf("lock after update -y: %+v", e)
	}
	if out := c.ok("run", main); out != "hello, world\n" {
		t.Fatalf("run after the update: %q", out)
	}
	if out := c.ok("recipes", "update", "--dir", app); !strings.Contains(out, "@shared: unchanged: ") || !strings.Contains(out, "is unchanged") {
		t.Fatalf("update with nothing new:\n%s", out)
	}

	// Tamper with the cached clone of the pinned commit: moving back to
	// the first commit must not diff against (or accept) the edited copy.
	cached := filepath.Join(c.root, "cache", "podmin", "recipes", "shared", second, "lib.star")
	if err := os.WriteFile(cached, []byte("def greet():\n    return \"pwned\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, lockNow := readLockFile(t, lockPath)
	out, errs, code := c.run("recipes", "update", "shared", "--to", first, "--dir", app, "-y")
	if code != 1 || !strings.Contains(out+errs, "is not commit "+second) || strings.Contains(out+errs, "pwned") {
		t.Fatalf("update over a tampered cache: exit %d\n%s%s", code, out, errs)
	}
	if _, after := readLockFile(t, lockPath); string(after) != string(lockNow) {
		t.Fatal("an update over a tampered cache changed the lock")
	}
}
