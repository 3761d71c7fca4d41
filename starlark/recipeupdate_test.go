// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// gitWork is a non-bare local git repository that a test commits to, used
// as the source of a pin by its path.
type gitWork struct {
	t   *testing.T
	dir string
}

func newGitWork(t *testing.T) *gitWork {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	g := &gitWork{t: t, dir: filepath.Join(t.TempDir(), "shared")}
	if err := os.MkdirAll(g.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	g.git("init", "-q")
	return g
}

func (g *gitWork) git(args ...string) string {
	g.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = g.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		g.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit replaces the repository's files (a nil content removes one) and
// returns the new commit.
func (g *gitWork) commit(files map[string]*string) string {
	g.t.Helper()
	for n, c := range files {
		p := filepath.Join(g.dir, n)
		if c == nil {
			g.git("rm", "-q", n)
			continue
		}
		writeFile(g.t, p, *c)
	}
	g.git("add", "-A")
	g.git("commit", "-q", "-m", "change")
	return g.git("rev-parse", "HEAD")
}

func sp(s string) *string { return &s }

func fileStatuses(c RecipeChange) []string {
	var out []string
	for _, f := range c.Files {
		out = append(out, f.Status+" "+f.Path)
	}
	return out
}

// TestRecipeAddUpdate pins a git repository by branch, moves the branch,
// and checks that the planned update shows each file's diff and changes
// nothing until it is applied; applied, the lock pins the new commit's
// content and a load runs it.
func TestRecipeAddUpdate(t *testing.T) {
	g := newGitWork(t)
	first := g.commit(map[string]*string{
		"lib.star": sp("def answer():\n    return 1\n"),
		"old.star": sp("old = True\n"),
		"doc.md":   sp("not pinned\n"),
	})
	e := newEnv(t)
	cache := filepath.Join(e.dir, "cache")
	root := filepath.Join(e.dir, "src", "root")
	main := e.write("root/main.star", "load(\"@shared//lib.star\", \"answer\")\nprint(answer())\n")

	src, err := ParseRecipeSource(g.dir + "@main")
	if err != nil || src.Git != g.dir || src.Pin != "main" {
		t.Fatalf("parse: %+v %v", src, err)
	}
	add, err := PlanRecipeAdd(root, cache, "shared", src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, LockFile)); !os.IsNotExist(err) {
		t.Fatalf("planning an add wrote the lock: %v", err)
	}
	c := add.Changes[0]
	if !c.New || c.After.Commit != first || c.After.Ref != "main" || !slices.Equal(fileStatuses(c), []string{"added lib.star", "added old.star"}) {
		t.Fatalf("add plan: %+v", c)
	}
	if !slices.Contains(c.Files[0].Diff, "+    return 1") {
		t.Errorf("an added file's content is not shown: %q", c.Files[0].Diff)
	}
	if err := add.Apply(); err != nil {
		t.Fatal(err)
	}
	if err := e.host(Options{CacheDir: cache}).Run(context.Background(), main, nil); err != nil || e.stdout.String() != "1\n" {
		t.Fatalf("run at the added pin: %v %q", err, e.stdout.String())
	}

	second := g.commit(map[string]*string{
		"lib.star": sp("def answer():\n    return 2\n"),
		"old.star": nil,
		"new.star": sp("new = True\n"),
	})
	lockBefore, err := os.ReadFile(filepath.Join(root, LockFile))
	if err != nil {
		t.Fatal(err)
	}
	up, err := PlanRecipeUpdate(root, cache, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	c = up.Changes[0]
	if c.Before.Commit != first || c.After.Commit != second || !up.Changed() {
		t.Fatalf("update plan: %+v", c)
	}
	if got := fileStatuses(c); !slices.Equal(got, []string{"changed lib.star", "added new.star", "removed old.star"}) {
		t.Fatalf("update files: %q", got)
	}
	if d := c.Files[0].Diff; !slices.Contains(d, "-    return 1") || !slices.Contains(d, "+    return 2") || !slices.Contains(d, " def answer():") {
		t.Errorf("changed file's diff: %q", d)
	}
	if d := c.Files[2].Diff; !slices.Equal(d, []string{"-old = True"}) {
		t.Errorf("removed file's diff: %q", d)
	}
	if after, _ := os.ReadFile(filepath.Join(root, LockFile)); !bytes.Equal(after, lockBefore) {
		t.Fatal("planning an update changed the lock")
	}
	if err := up.Apply(); err != nil {
		t.Fatal(err)
	}
	lk, _, err := readLock(root)
	if err != nil {
		t.Fatal(err)
	}
	got := lk.Recipes["shared"]
	if got.Commit != second || got.Ref != "main" || got.Digest != CommitDigest(second, got.Files) || len(got.Files) != 2 {
		t.Fatalf("applied lock: %+v", got)
	}
	e.stdout.Reset()
	if err := e.host(Options{CacheDir: cache}).Run(context.Background(), main, nil); err != nil || e.stdout.String() != "2\n" {
		t.Fatalf("run at the updated pin: %v %q", err, e.stdout.String())
	}

	// Nothing moved: the plan says so.
	again, err := PlanRecipeUpdate(root, cache, []string{"shared"}, "")
	if err != nil || again.Changed() {
		t.Fatalf("a second update: %v %+v", err, again)
	}
	// Back to the first commit by --to, then the lock changes under the
	// plan: Apply refuses to overwrite what was not reviewed.
	back, err := PlanRecipeUpdate(root, cache, []string{"shared"}, first)
	if err != nil || back.Changes[0].After.Commit != first || back.Changes[0].After.Ref != "" {
		t.Fatalf("update --to: %v %+v", err, back)
	}
	writeFile(t, filepath.Join(root, LockFile), string(lockBefore))
	if err := back.Apply(); err == nil || !strings.Contains(err.Error(), "changed since its diff was shown") {
		t.Fatalf("apply over a changed lock: %v", err)
	}
}

// TestRecipeUpdateTamperedCache edits the cached clone of the pinned and
// then of the new commit: the update is refused, and the lock is kept.
func TestRecipeUpdateTamperedCache(t *testing.T) {
	g := newGitWork(t)
	first := g.commit(map[string]*string{"lib.star": sp("x = 1\n")})
	e := newEnv(t)
	cache := filepath.Join(e.dir, "cache")
	root := filepath.Dir(e.write("root/keep", ""))
	add, err := PlanRecipeAdd(root, cache, "shared", RecipeSource{Git: g.dir, Pin: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if err := add.Apply(); err != nil {
		t.Fatal(err)
	}
	second := g.commit(map[string]*string{"lib.star": sp("x = 2\n")})
	for _, commit := range []string{first, second} {
		if _, err := PlanRecipeUpdate(root, cache, nil, ""); err != nil {
			t.Fatal(err) // fetches both commits into the cache
		}
		cached := filepath.Join(cache, "recipes", "shared", commit, "lib.star")
		orig, err := os.ReadFile(cached)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, cached, "x = \"pwned\"\n")
		up, err := PlanRecipeUpdate(root, cache, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if up.Changed() || up.Failed() == nil || !strings.Contains(up.Failed().Error(), "is not commit "+commit) || strings.Contains(up.Failed().Error(), "pwned") {
			t.Fatalf("tampered %s (changed %v): %v", commit, up.Changed(), up.Failed())
		}
		writeFile(t, cached, string(orig))
	}
}

// TestRecipeSourceAndNames checks the forms a source and a name take.
func TestRecipeSourceAndNames(t *testing.T) {
	dir := t.TempDir()
	for in, want := range map[string]RecipeSource{
		"https://example.com/r.git@v1.2":  {Git: "https://example.com/r.git", Pin: "v1.2"},
		"git@example.com:org/r.git@main":  {Git: "git@example.com:org/r.git", Pin: "main"},
		"https://example.com/r.git@rel/1": {Git: "https://example.com/r.git", Pin: "rel/1"},
		dir:                               {Path: dir},
	} {
		got, err := ParseRecipeSource(in)
		if err != nil || got != want {
			t.Errorf("%s: %+v %v, want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"git@example.com:org/r.git", "https://example.com/r.git", filepath.Join(dir, "absent")} {
		if _, err := ParseRecipeSource(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	for _, name := range []string{"../x", "a/b", "", ".."} {
		if _, err := PlanRecipeAdd(dir, dir, name, RecipeSource{Path: dir}); err == nil || !strings.Contains(err.Error(), "invalid repository name") {
			t.Errorf("name %q: %v", name, err)
		}
	}
}
