// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitRepo makes a bare repository holding files in one commit and returns
// its path and the commit.
func gitRepo(t *testing.T, files map[string]string) (string, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	work, bare := filepath.Join(dir, "work"), filepath.Join(dir, "repo.git")
	for n, c := range files {
		p := filepath.Join(work, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(dir string, args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run(work, "init", "-q")
	run(work, "add", ".")
	run(work, "commit", "-q", "-m", "recipes")
	run(dir, "clone", "-q", "--bare", work, bare)
	return bare, run(work, "rev-parse", "HEAD")
}

func TestLoadForms(t *testing.T) {
	e := newEnv(t)
	bare, commit := gitRepo(t, map[string]string{
		"y.star":     "load(\"//z.star\", \"z\")\ny = \"remote+\" + z\n",
		"z.star":     "z = \"z\"\n",
		"lib/w.star": "w = \"w\"\n",
	})
	e.write("shared/x.star", "x = \"local\"\n")
	e.write("root/podmin.star.lock", fmt.Sprintf(`{"recipes": {"local": {"path": "../shared"}, "remote": {"git": %q, "commit": %q}}}`, bare, commit))
	e.write("root/lib/a.star", "a = [\"root\"]\n")
	e.write("root/app/helper.star", "load(\"//lib/a.star\", \"a\")\nh = \"helper\"\n")
	if _, err := LockRecipes(filepath.Join(e.dir, "src", "root"), filepath.Join(e.dir, "cache")); err != nil {
		t.Fatal(err)
	}
	main := e.write("root/app/main.star", `
load("./helper.star", "h")
load("//lib/a.star", "a")
load("@local//x.star", "x")
load("@remote//y.star", "y")
print(h, a, x, y)
`)
	for i := 0; i < 2; i++ { // the second run finds the clone in the cache
		e.stdout.Reset()
		if err := e.host(Options{}).Run(context.Background(), main, nil); err != nil {
			t.Fatal(err)
		}
		if got := e.stdout.String(); got != "helper [\"root\"] local remote+z\n" {
			t.Fatalf("run %d: %q", i, got)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "cache", "recipes", "remote", commit, "y.star")); err != nil {
		t.Fatalf("the pinned commit is not in the cache: %v", err)
	}

	// Loaded modules are frozen.
	err := e.host(Options{}).Run(context.Background(), e.write("root/app/mutate.star", "load(\"//lib/a.star\", \"a\")\na.append(1)\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "frozen list") {
		t.Fatalf("got %v, want a frozen-list error", err)
	}

	// A wrong commit is refused with the pinned commit named.
	e.write("bad/podmin.star.lock", fmt.Sprintf(`{"recipes": {"remote": {"git": %q, "commit": %q, "digest": "sha256:x", "files": {"y.star": "sha256:x"}}}}`, bare, strings.Repeat("0", 40)))
	err = e.host(Options{}).Run(context.Background(), e.write("bad/main.star", "load(\"@remote//y.star\", \"y\")\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "repository @remote: commit "+strings.Repeat("0", 40)) {
		t.Fatalf("got %v", err)
	}
	// A tampered cache copy is detected by its commit.
	cached := filepath.Join(e.dir, "cache", "recipes", "remote", commit)
	if out, err := exec.Command("git", "-C", cached, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "tamper").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	err = e.host(Options{}).Run(context.Background(), main, nil)
	if err == nil || !strings.Contains(err.Error(), "not the pinned "+commit) {
		t.Fatalf("got %v", err)
	}
}

// TestLockPinsContent edits a file of a locked repository, in the fetch
// cache and in a local path: the load fails naming the file (and for a
// local path both digests; a git copy is not its commit any more), and a
// local path runs again after "podmin recipes lock" accepts the change.
func TestLockPinsContent(t *testing.T) {
	e := newEnv(t)
	bare, commit := gitRepo(t, map[string]string{
		"y.star":     "load(\"./inner.star\", \"i\")\ny = \"remote \" + i\n",
		"inner.star": "i = \"inner\"\n",
	})
	shared := e.write("shared/x.star", "x = \"local\"\n")
	lockPath := e.write("root/podmin.star.lock", fmt.Sprintf(`{"recipes": {"local": {"path": "../shared"}, "remote": {"git": %q, "commit": %q}}}`, bare, commit))
	main := e.write("root/main.star", "load(\"@local//x.star\", \"x\")\nload(\"@remote//y.star\", \"y\")\nprint(x, y)\n")
	run := func() error {
		e.stdout.Reset()
		return e.host(Options{}).Run(context.Background(), main, nil)
	}
	if err := run(); err == nil || !strings.Contains(err.Error(), "pins no content: run \"podmin recipes lock\"") {
		t.Fatalf("a lock without digests: %v", err)
	}
	root := filepath.Dir(lockPath)
	cache := filepath.Join(e.dir, "cache")
	if _, err := LockRecipes(root, cache); err != nil {
		t.Fatal(err)
	}
	if err := run(); err != nil || e.stdout.String() != "local remote inner\n" {
		t.Fatalf("locked run: %v %q", err, e.stdout.String())
	}
	lk, _, err := readLock(root)
	if err != nil {
		t.Fatal(err)
	}
	inner := filepath.Join(cache, "recipes", "remote", commit, "inner.star")
	for _, tc := range []struct {
		file, rel, repo string
	}{
		{inner, "inner.star", "remote"}, // loaded relatively from inside the repository
		{shared, "x.star", "local"},
	} {
		old, _ := os.ReadFile(tc.file)
		tampered := []byte(strings.Replace(string(old), "\"", "\"evil ", 1))
		if err := os.WriteFile(tc.file, tampered, 0o644); err != nil {
			t.Fatal(err)
		}
		err := run()
		want := fmt.Sprintf("@%s//%s (%s) does not match %s: its content is %s, the lock pins %s", tc.repo, tc.rel, tc.file, lockPath, FileDigest(tampered), lk.Recipes[tc.repo].Files[tc.rel])
		if tc.repo == "remote" {
			want = fmt.Sprintf("the cached copy %s is not commit %s: modified %s: a commit's content cannot change", filepath.Dir(tc.file), commit, tc.rel)
		}
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(e.stdout.String(), "evil") {
			t.Fatalf("tampered %s: %v\nwant %s", tc.rel, err, want)
		}
		if err := os.WriteFile(tc.file, old, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A changed tree digest (a hand-edited lock) is refused too.
	data, _ := os.ReadFile(lockPath)
	if err := os.WriteFile(lockPath, []byte(strings.Replace(string(data), lk.Recipes["local"].Digest, "sha256:00", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(); err == nil || !strings.Contains(err.Error(), "not the recorded digest sha256:00") {
		t.Fatalf("edited digest: %v", err)
	}
	// Accepting a change: edit, lock again, run.
	if err := os.WriteFile(shared, []byte("x = \"changed\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LockRecipes(root, cache); err != nil {
		t.Fatal(err)
	}
	if err := run(); err != nil || e.stdout.String() != "changed remote inner\n" {
		t.Fatalf("relocked run: %v %q", err, e.stdout.String())
	}
}
