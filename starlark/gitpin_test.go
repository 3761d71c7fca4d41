// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gitPinFixture is a recipe root whose lock pins one git repository, locked
// once, with the paths a test tampers with.
type gitPinFixture struct {
	e                      *env
	root, lockPath, cache  string
	cached, commit, remote string
	main                   string
}

func newGitPinFixture(t *testing.T) *gitPinFixture {
	t.Helper()
	e := newEnv(t)
	bare, commit := gitRepo(t, map[string]string{
		"lib/util.star":  "def greet():\n    return \"hello\"\n",
		"y.star":         "load(\"//lib/util.star\", \"greet\")\ny = greet()\n",
		".ci/check.star": "c = 1\n",
		"README.md":      "shared recipes\n",
	})
	f := &gitPinFixture{e: e, commit: commit, remote: bare, cache: filepath.Join(e.dir, "cache")}
	f.lockPath = e.write("root/podmin.star.lock", fmt.Sprintf(`{"recipes": {"remote": {"git": %q, "commit": %q}}}`, bare, commit))
	f.root = filepath.Dir(f.lockPath)
	f.main = e.write("root/main.star", "load(\"@remote//y.star\", \"y\")\nprint(y)\n")
	f.cached = filepath.Join(f.cache, "recipes", "remote", commit)
	if _, err := LockRecipes(f.root, f.cache); err != nil {
		t.Fatal(err)
	}
	if err := f.run(); err != nil || e.stdout.String() != "hello\n" {
		t.Fatalf("locked run: %v %q", err, e.stdout.String())
	}
	return f
}

func (f *gitPinFixture) run() error {
	f.e.stdout.Reset()
	return f.e.host(Options{}).Run(context.Background(), f.main, nil)
}

func (f *gitPinFixture) lockBytes(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(f.lockPath)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestGitPinTamperedCache edits, adds and removes files in the cached
// clone of a git-pinned repository without changing its commit: loading
// refuses it naming tampering (never "run lock to accept it"), lock refuses
// to record it and says how to recover, and removing the copy recovers.
func TestGitPinTamperedCache(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, dir string)
		what   string
	}{
		{"modified", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "lib", "util.star"), "def greet():\n    return \"evil\"\n")
		}, "modified lib/util.star"},
		{"added", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "lib", "extra.star"), "x = 1\n")
		}, "added lib/extra.star"},
		{"removed", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "README.md")); err != nil {
				t.Fatal(err)
			}
		}, "missing README.md"},
		{"hidden directory", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, ".ci", "check.star"), "c = 2\n")
		}, "modified .ci/check.star"},
		{"replaced by a symlink", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "y.star")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("lib/util.star", p); err != nil {
				t.Fatal(err)
			}
		}, "changed type of y.star"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newGitPinFixture(t)
			before := f.lockBytes(t)
			tc.tamper(t, f.cached)

			err := f.run()
			wantLoad := fmt.Sprintf("repository @remote: the cached copy %s is not commit %s: %s: a commit's content cannot change, so the copy was tampered with or corrupted; nothing from it was run: remove %s and it is cloned again from %s", f.cached, f.commit, tc.what, f.cached, f.remote)
			if err == nil || !strings.Contains(err.Error(), wantLoad) {
				t.Fatalf("load of a tampered copy: %v\nwant %s", err, wantLoad)
			}
			if strings.Contains(err.Error(), "recipes lock") || strings.Contains(f.e.stdout.String(), "evil") {
				t.Fatalf("load error offers lock, or ran the tampered file: %v %q", err, f.e.stdout.String())
			}

			_, err = LockRecipes(f.root, f.cache)
			if err == nil || !strings.Contains(err.Error(), wantLoad) {
				t.Fatalf("lock of a tampered copy: %v\nwant %s", err, wantLoad)
			}
			if after := f.lockBytes(t); string(after) != string(before) {
				t.Fatalf("lock rewrote %s from a tampered copy:\n%s", f.lockPath, after)
			}

			// The way out the error names: remove the copy, load again.
			if err := os.RemoveAll(f.cached); err != nil {
				t.Fatal(err)
			}
			if err := f.run(); err != nil || f.e.stdout.String() != "hello\n" {
				t.Fatalf("after removing the copy: %v %q", err, f.e.stdout.String())
			}
		})
	}
}

// TestGitPinDigestChangeIsTampering gives a git pin, under the same
// commit, digests other than the commit's content, as a lock written from
// a modified copy had: loading names tampering, lock refuses to replace
// them, and removing them lets lock pin the commit's own content.
func TestGitPinDigestChangeIsTampering(t *testing.T) {
	f := newGitPinFixture(t)
	lk, _, err := readLock(f.root)
	if err != nil {
		t.Fatal(err)
	}
	e := lk.Recipes["remote"]
	want := e.Digest
	e.Files["lib/util.star"] = FileDigest([]byte("def greet():\n    return \"evil\"\n"))
	e.Digest = CommitDigest(e.Commit, e.Files)
	lk.Recipes["remote"] = e
	writeLock(t, f.lockPath, lk)
	before := f.lockBytes(t)

	err = f.run()
	wantLoad := fmt.Sprintf("repository @remote: %s pins content %s for commit %s, but the commit holds %s: a commit's content cannot change, so the lock was tampered with or written from a modified copy; nothing from it was run", f.lockPath, e.Digest, f.commit, want)
	if err == nil || !strings.Contains(err.Error(), wantLoad) || strings.Contains(err.Error(), "to accept it") {
		t.Fatalf("load: %v\nwant %s", err, wantLoad)
	}
	_, err = LockRecipes(f.root, f.cache)
	if err == nil || !strings.Contains(err.Error(), wantLoad) || !strings.Contains(err.Error(), `remove "digest" and "files" of @remote from it, then run "podmin recipes lock"`) {
		t.Fatalf("lock: %v", err)
	}
	if string(f.lockBytes(t)) != string(before) {
		t.Fatal("lock replaced the digests of an unchanged commit")
	}

	// Recovery as the error says: forget the digests, lock again.
	e.Files, e.Digest = nil, ""
	lk.Recipes["remote"] = e
	writeLock(t, f.lockPath, lk)
	rep, err := LockRecipes(f.root, f.cache)
	if err != nil || rep.Lock.Recipes["remote"].Digest != want {
		t.Fatalf("relock: %+v %v, want digest %s", rep, err, want)
	}
	if err := f.run(); err != nil || f.e.stdout.String() != "hello\n" {
		t.Fatalf("after relock: %v %q", err, f.e.stdout.String())
	}
}

// TestGitPinCommitChange moves a pin to another commit: the digests of the
// old one no longer describe it, so loading asks for a lock, and lock
// pins the new commit's content.
func TestGitPinCommitChange(t *testing.T) {
	f := newGitPinFixture(t)
	bare2, commit2 := gitRepo(t, map[string]string{
		"lib/util.star": "def greet():\n    return \"hello again\"\n",
		"y.star":        "load(\"//lib/util.star\", \"greet\")\ny = greet()\n",
	})
	lk, _, err := readLock(f.root)
	if err != nil {
		t.Fatal(err)
	}
	e := lk.Recipes["remote"]
	e.Git, e.Commit = bare2, commit2
	lk.Recipes["remote"] = e
	writeLock(t, f.lockPath, lk)
	if err := f.run(); err == nil || !strings.Contains(err.Error(), "were locked for another commit") || !strings.Contains(err.Error(), `run "podmin recipes lock"`) {
		t.Fatalf("load after a commit change: %v", err)
	}
	rep, err := LockRecipes(f.root, f.cache)
	if err != nil || len(rep.Repos) != 1 || strings.Join(rep.Repos[0].Changed, ",") != "lib/util.star" {
		t.Fatalf("lock after a commit change: %+v %v", rep, err)
	}
	if err := f.run(); err != nil || f.e.stdout.String() != "hello again\n" {
		t.Fatalf("run after relock: %v %q", err, f.e.stdout.String())
	}
}

// TestGitPinEarlierLockFormat reads a lock whose git digests an earlier
// Podmin wrote without binding them to the commit: lock rewrites it when
// its files are the commit's, and refuses when they are not.
func TestGitPinEarlierLockFormat(t *testing.T) {
	f := newGitPinFixture(t)
	lk, _, err := readLock(f.root)
	if err != nil {
		t.Fatal(err)
	}
	e := lk.Recipes["remote"]
	want := e.Digest
	e.Digest = TreeDigest(e.Files)
	lk.Recipes["remote"] = e
	writeLock(t, f.lockPath, lk)
	if err := f.run(); err == nil || !strings.Contains(err.Error(), "an earlier version of Podmin") {
		t.Fatalf("load of an earlier lock: %v", err)
	}
	rep, err := LockRecipes(f.root, f.cache)
	if err != nil || rep.Lock.Recipes["remote"].Digest != want || len(rep.Repos[0].Changed) != 0 {
		t.Fatalf("relock of an earlier lock: %+v %v", rep, err)
	}

	e.Files["lib/util.star"] = FileDigest([]byte("tampered"))
	e.Digest = TreeDigest(e.Files)
	lk.Recipes["remote"] = e
	writeLock(t, f.lockPath, lk)
	before := f.lockBytes(t)
	_, err = LockRecipes(f.root, f.cache)
	if err == nil || !strings.Contains(err.Error(), "does not record which commit they describe") || string(f.lockBytes(t)) != string(before) {
		t.Fatalf("relock of an earlier lock with other files: %v", err)
	}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeLock(t *testing.T, p string, lk *Lock) {
	t.Helper()
	data, err := json.MarshalIndent(lk, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
