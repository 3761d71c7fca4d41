// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Lock is the content of podmin.star.lock: each shared recipe repository
// that @name//path loads refer to, pinned to a local directory or to a git
// URL and commit.
//
//	{
//	  "recipes": {
//	    "platform": {"path": "../platform-recipes"},
//	    "shared":   {"git": "https://example.com/shared.git", "commit": "<40 hex digits>"}
//	  }
//	}
//
// A path is relative to the lock file's directory. A git repository is
// cloned once into <cache>/recipes/<name>/<commit> and its checked-out
// commit verified on every use.
type Lock struct {
	Recipes map[string]LockEntry `json:"recipes"`
}

// LockEntry pins one repository: Path, or Git with Commit.
type LockEntry struct {
	Path   string `json:"path,omitempty"`
	Git    string `json:"git,omitempty"`
	Commit string `json:"commit,omitempty"`
}

var commitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// readLock reads and checks root/podmin.star.lock.
func readLock(root string) (*Lock, string, error) {
	p := filepath.Join(root, LockFile)
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, p, err
	}
	var lk Lock
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&lk); err != nil {
		return nil, p, fmt.Errorf("%s is not a valid lock file: %w", p, err)
	}
	return &lk, p, nil
}

// repository returns the local directory of @name as pinned by the lock
// file of the loading file's recipe root.
func (l *loader) repository(fromAbs, name string) (string, error) {
	root, err := l.root(filepath.Dir(fromAbs))
	if err != nil {
		return "", err
	}
	lk, lockPath, err := readLock(root)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("unknown repository @%s: there is no %s in the recipe root %s: pin it there as {\"recipes\": {%q: {\"path\": \"…\"}}}", name, LockFile, root, name)
	}
	if err != nil {
		return "", err
	}
	e, ok := lk.Recipes[name]
	if !ok {
		known := make([]string, 0, len(lk.Recipes))
		for n := range lk.Recipes {
			known = append(known, "@"+n)
		}
		sort.Strings(known)
		return "", fmt.Errorf("unknown repository @%s: %s pins %q: add @%s to it", name, lockPath, known, name)
	}
	var dir string
	switch {
	case e.Path != "" && e.Git == "":
		dir = e.Path
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(root, dir)
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return "", fmt.Errorf("repository @%s: %s is not a directory (pinned in %s)", name, dir, lockPath)
		}
	case e.Git != "" && e.Path == "":
		if !commitRE.MatchString(e.Commit) {
			return "", fmt.Errorf("repository @%s in %s: commit must be a full 40-digit hex commit, not %q", name, lockPath, e.Commit)
		}
		if dir, err = l.fetch(name, e); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("repository @%s in %s: give either path, or git and commit", name, lockPath)
	}
	l.repos[dir] = name
	return dir, nil
}

// fetch clones e.Git at e.Commit into the cache once, and verifies the
// checked-out commit of the cached copy on every use.
func (l *loader) fetch(name string, e LockEntry) (string, error) {
	if l.h.opts.CacheDir == "" {
		return "", fmt.Errorf("repository @%s: no cache directory to fetch it into", name)
	}
	parent := filepath.Join(l.h.opts.CacheDir, "recipes", name)
	dir := filepath.Join(parent, e.Commit)
	if _, err := os.Stat(dir); err == nil {
		if err := verifyCommit(dir, e.Commit); err != nil {
			return "", fmt.Errorf("repository @%s: cached copy %s: %w: remove it to fetch again", name, dir, err)
		}
		return dir, nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("repository @%s: %w", name, err)
	}
	tmp, err := os.MkdirTemp(parent, ".fetch-")
	if err != nil {
		return "", fmt.Errorf("repository @%s: %w", name, err)
	}
	defer os.RemoveAll(tmp)
	if _, err := git(tmp, "clone", "--quiet", "--no-checkout", e.Git, "."); err != nil {
		return "", fmt.Errorf("repository @%s: clone %s: %w", name, e.Git, err)
	}
	if _, err := git(tmp, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", e.Commit); err != nil {
		return "", fmt.Errorf("repository @%s: commit %s of %s: %w: check the commit in %s", name, e.Commit, e.Git, err, LockFile)
	}
	if err := verifyCommit(tmp, e.Commit); err != nil {
		return "", fmt.Errorf("repository @%s: %w", name, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("repository @%s: %w", name, err)
	}
	return dir, nil
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
