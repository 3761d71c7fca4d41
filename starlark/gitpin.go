// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// A git pin names a commit, and a commit's ID is a hash over its tree,
// which is a hash over every file. So the cached copy is checked against
// the commit alone: each object read from the clone is hashed and must
// have the ID its parent names, and each file of the working tree must
// hash to the blob ID of its tree entry. Nothing but the pinned commit ID
// is trusted: not the clone's index, refs or object files, nor git's
// own status (which trusts them).

// CommitDigest is the tree digest of a git pin: the commit's ID, then one
// line per file as TreeDigest has them, so the digest states which
// commit's content it describes. A lock whose digest is not that of its
// commit was locked for another commit or edited.
func CommitDigest(commit string, files map[string]string) string {
	h := sha256.New()
	fmt.Fprintf(h, "commit %s\n", commit)
	writeTreeLines(h, files)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func writeTreeLines(w io.Writer, files map[string]string) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "%s %s\n", n, files[n])
	}
}

// verifyCheckout proves that the working tree at dir is exactly commit:
// HEAD is the commit, every object read hashes to its ID, and every file
// is the commit's. It returns the digests of the commit's .star files,
// or, when the copy is not the commit, what differs.
func verifyCheckout(dir, commit string) (star map[string]string, differs string, err error) {
	if err := verifyCommit(dir, commit); err != nil {
		return nil, err.Error(), nil
	}
	want, err := commitFiles(dir, commit)
	if errors.Is(err, errCorrupt) {
		return nil, err.Error(), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read commit %s in %s: %w", commit, dir, err)
	}
	diffs, star, err := checkoutDiff(dir, want)
	if err != nil {
		return nil, "", fmt.Errorf("compare %s with commit %s: %w", dir, commit, err)
	}
	if len(diffs) > 0 {
		const shown = 5
		if len(diffs) > shown {
			diffs = append(diffs[:shown], fmt.Sprintf("and %d more", len(diffs)-shown))
		}
		return nil, strings.Join(diffs, ", "), nil
	}
	return star, "", nil
}

// tampered is the error for a cached copy that is not its commit.
func tampered(name, dir string, e LockEntry, what string) error {
	return fmt.Errorf("repository @%s: the cached copy %s is not commit %s: %s: a commit's content cannot change, so the copy was tampered with or corrupted; nothing from it was run: remove %s and it is cloned again from %s", name, dir, e.Commit, what, dir, e.Git)
}

// pinnedElsewhere is the error for a lock whose digests, locked for its
// commit, are not that commit's content.
func pinnedElsewhere(name, lockPath string, e LockEntry, actual string) error {
	return fmt.Errorf("repository @%s: %s pins content %s for commit %s, but the commit holds %s: a commit's content cannot change, so the lock was tampered with or written from a modified copy; nothing from it was run: check the history of %s; to pin the commit's own content, remove \"digest\" and \"files\" of @%s from it, then run \"podmin recipes lock\"", name, lockPath, e.Digest, e.Commit, actual, lockPath, name)
}

// relockable refuses to replace a git pin's digests that describe its
// commit but differ from the commit's content: the commit is unchanged,
// so they were tampered with or written from a modified copy. Digests
// locked for another commit (the pin moved) are replaced.
func relockable(name, lockPath string, before LockEntry, files map[string]string) error {
	switch {
	case before.Digest == "":
		return nil
	case before.Digest == CommitDigest(before.Commit, before.Files):
		return checkCommitContent(name, lockPath, before, files)
	case before.Digest == TreeDigest(before.Files) && TreeDigest(before.Files) != TreeDigest(files):
		return fmt.Errorf("repository @%s: %s pins files other than those of commit %s, and, written by an earlier version of Podmin, does not record which commit they describe: if you changed the commit, remove \"digest\" and \"files\" of @%s from it, then run \"podmin recipes lock\"; if not, they were written from a modified copy (tampering or corruption): check the history of %s", name, lockPath, before.Commit, name, lockPath)
	}
	return nil
}

// fetch clones e.Git at e.Commit into the cache once, and proves on
// every use (once per loader) that the cached copy is exactly the
// commit. It returns the copy and the digests of its .star files.
func (l *loader) fetch(name string, e LockEntry) (string, map[string]string, error) {
	if l.h.opts.CacheDir == "" {
		return "", nil, fmt.Errorf("repository @%s: no cache directory to fetch it into", name)
	}
	parent := filepath.Join(l.h.opts.CacheDir, "recipes", name)
	dir := filepath.Join(parent, e.Commit)
	if files, ok := l.proven[dir]; ok {
		return dir, files, nil
	}
	if _, err := os.Stat(dir); err == nil {
		files, differs, err := verifyCheckout(dir, e.Commit)
		if err != nil {
			return "", nil, fmt.Errorf("repository @%s: %w", name, err)
		}
		if differs != "" {
			return "", nil, tampered(name, dir, e, differs)
		}
		l.proven[dir] = files
		return dir, files, nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", nil, fmt.Errorf("repository @%s: %w", name, err)
	}
	tmp, err := os.MkdirTemp(parent, ".fetch-")
	if err != nil {
		return "", nil, fmt.Errorf("repository @%s: %w", name, err)
	}
	defer os.RemoveAll(tmp)
	if _, err := git(tmp, "clone", "--quiet", "--no-checkout", e.Git, "."); err != nil {
		return "", nil, fetchFailed{fmt.Errorf("repository @%s: clone %s: %w", name, e.Git, err)}
	}
	// The working tree must be the blobs byte for byte: no line-ending
	// conversion, filter or encoding from the repository's attributes or
	// the user's configuration (info/attributes outranks both).
	if err := os.WriteFile(filepath.Join(tmp, ".git", "info", "attributes"), []byte("* -text -eol -filter -ident -working-tree-encoding\n"), 0o644); err != nil {
		return "", nil, fmt.Errorf("repository @%s: %w", name, err)
	}
	if _, err := git(tmp, "-c", "advice.detachedHead=false", "-c", "core.autocrlf=false", "-c", "core.symlinks=true", "checkout", "--quiet", "--detach", e.Commit); err != nil {
		return "", nil, fetchFailed{fmt.Errorf("repository @%s: commit %s of %s: %w: check the commit in %s", name, e.Commit, e.Git, err, LockFile)}
	}
	files, differs, err := verifyCheckout(tmp, e.Commit)
	if err != nil {
		return "", nil, fmt.Errorf("repository @%s: %w", name, err)
	}
	if differs != "" {
		return "", nil, fmt.Errorf("repository @%s: the clone of %s does not prove commit %s: %s: nothing was kept; check the repository and the commit in %s", name, e.Git, e.Commit, differs, LockFile)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", nil, fmt.Errorf("repository @%s: %w", name, err)
	}
	l.proven[dir] = files
	return dir, files, nil
}

func verifyCommit(dir, want string) error {
	got, err := git(dir, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("checked out commit %s, not the pinned %s", got, want)
	}
	return nil
}

// git runs git in dir without prompting and returns its trimmed output.
func git(dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(context.Background(), "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}
