// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"podmin.dev/podmin/internal/paths"
)

// Lock is the content of podmin.star.lock: each shared recipe repository
// that @name//path loads refer to, pinned to a local directory or to a git
// URL and commit, and to the content of its .star files.
//
//	{
//	  "recipes": {
//	    "platform": {"path": "../platform-recipes", "digest": "sha256:…",
//	                 "files": {"rollout.star": "sha256:…"}},
//	    "shared":   {"git": "https://example.com/shared.git", "commit": "<40 hex digits>",
//	                 "digest": "sha256:…", "files": {…}}
//	  }
//	}
//
// A path is relative to the lock file's directory. A git repository is
// cloned once into <cache>/recipes/<name>/<commit>, and on every use the
// cached copy is proven to be exactly that commit from the commit's own
// objects (verifyCheckout): a modified copy is tampering or corruption,
// never content to accept. Every file loaded from a repository, by
// @name//path or by a load inside it, must match its SHA-256 in files
// before it runs, so editing a cached or local copy cannot change what
// runs. "podmin recipes lock" writes the digests: a local directory's as
// it is, a git pin's from its commit (see CommitDigest).
type Lock struct {
	Recipes map[string]LockEntry `json:"recipes"`
}

// LockEntry pins one repository: Path, or Git with Commit; and its content.
type LockEntry struct {
	Path   string `json:"path,omitempty"`
	Git    string `json:"git,omitempty"`
	Commit string `json:"commit,omitempty"`
	// Ref is the branch or tag a git pin follows: "podmin recipes update"
	// moves Commit to where it points then (HEAD when empty).
	Ref string `json:"ref,omitempty"`
	// Digest is the tree digest of Files: TreeDigest for a path,
	// CommitDigest for a git commit.
	Digest string `json:"digest,omitempty"`
	// Files maps the slash path of each .star file of the repository to
	// "sha256:<hex>" of its bytes.
	Files map[string]string `json:"files,omitempty"`
}

// FileDigest is the digest of one file's bytes as the lock records it.
func FileDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TreeDigest is the digest of a repository's locked files: SHA-256 over
// one line "<path> <file digest>\n" per file, in path order.
func TreeDigest(files map[string]string) string {
	h := sha256.New()
	writeTreeLines(h, files)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// pinned is a repository directory and the lock entry its files must match.
type pinned struct {
	name     string
	entry    LockEntry
	lockPath string
}

// verify checks the bytes of abs, a file inside the repository dir,
// against the lock before it is executed.
func (p pinned) verify(dir, abs string, data []byte) error {
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		return err
	}
	rel = filepath.ToSlash(rel)
	want, ok := p.entry.Files[rel]
	got := FileDigest(data)
	if p.entry.Git != "" && (!ok || got != want) {
		// The copy was proven to be the commit when the repository was
		// opened: it changed since.
		return tampered(p.name, dir, p.entry, fmt.Sprintf("%s changed while it was in use (its content is %s, the commit's is %s)", rel, got, cmpOr(want, "none")))
	}
	if !ok {
		return fmt.Errorf("@%s//%s is not pinned in %s: review it, then run \"podmin recipes lock\" to pin it", p.name, rel, p.lockPath)
	}
	if got != want {
		return fmt.Errorf("@%s//%s (%s) does not match %s: its content is %s, the lock pins %s: review the change, then run \"podmin recipes lock\" to accept it", p.name, rel, abs, p.lockPath, got, want)
	}
	return nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// checkDigests refuses an entry without content digests or whose files
// do not add up to its tree digest.
func checkDigests(name string, e LockEntry, lockPath string) error {
	if e.Digest == "" || len(e.Files) == 0 {
		return fmt.Errorf("repository @%s in %s pins no content: run \"podmin recipes lock\" in %s", name, lockPath, filepath.Dir(lockPath))
	}
	if e.Git != "" {
		switch {
		case CommitDigest(e.Commit, e.Files) == e.Digest:
			return nil
		case TreeDigest(e.Files) == e.Digest:
			return fmt.Errorf("repository @%s in %s: its digests were written by an earlier version of Podmin, which did not bind them to the commit: run \"podmin recipes lock\" in %s (it pins the content of commit %s, proven from the commit's objects)", name, lockPath, filepath.Dir(lockPath), e.Commit)
		}
		return fmt.Errorf("repository @%s in %s: its digests were locked for another commit than %s, or edited: run \"podmin recipes lock\" in %s (it pins the commit's content, proven from the commit's objects)", name, lockPath, e.Commit, filepath.Dir(lockPath))
	}
	if got := TreeDigest(e.Files); got != e.Digest {
		return fmt.Errorf("repository @%s in %s: its files add up to %s, not the recorded digest %s: run \"podmin recipes lock\" again", name, lockPath, got, e.Digest)
	}
	return nil
}

// checkCommitContent compares a git pin's digests, locked for its commit,
// with what the commit holds.
func checkCommitContent(name, lockPath string, e LockEntry, files map[string]string) error {
	if actual := CommitDigest(e.Commit, files); actual != e.Digest {
		return pinnedElsewhere(name, lockPath, e, actual)
	}
	return nil
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
	dir, files, err := l.repoDir(root, name, e, lockPath)
	if err != nil {
		return "", err
	}
	if err := checkDigests(name, e, lockPath); err != nil {
		return "", err
	}
	if e.Git != "" {
		if err := checkCommitContent(name, lockPath, e, files); err != nil {
			return "", err
		}
	}
	l.repos[dir] = name
	l.pins[dir] = pinned{name: name, entry: e, lockPath: lockPath}
	return dir, nil
}

// repoDir returns the local directory of the repository e pins: its path,
// or its git commit fetched into the cache and proven to be the commit,
// with the digests of the commit's .star files (nil for a path).
func (l *loader) repoDir(root, name string, e LockEntry, lockPath string) (string, map[string]string, error) {
	switch {
	case e.Path != "" && e.Git == "":
		dir := e.Path
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(root, dir)
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return "", nil, fmt.Errorf("repository @%s: %s is not a directory (pinned in %s)", name, dir, lockPath)
		}
		return dir, nil, nil
	case e.Git != "" && e.Path == "":
		if !commitRE.MatchString(e.Commit) {
			return "", nil, fmt.Errorf("repository @%s in %s: commit must be a full 40-digit hex commit, not %q", name, lockPath, e.Commit)
		}
		return l.fetch(name, e)
	default:
		return "", nil, fmt.Errorf("repository @%s in %s: give either path, or git and commit", name, lockPath)
	}
}

// LockReport is what LockRecipes did: the lock file it wrote and, per
// repository in name order, how its pinned files changed.
type LockReport struct {
	Path  string
	Lock  *Lock
	Repos []RepoChange
}

// RepoChange is how one repository's pinned files changed: the slash paths
// of the files added, changed and removed since the previous lock. First
// is set when the repository pinned no content before.
type RepoChange struct {
	Name                    string
	Files                   int
	Digest                  string
	First                   bool
	Added, Changed, Removed []string
}

// diffFiles compares two pins of a repository's files.
func diffFiles(name string, before, after LockEntry) RepoChange {
	rc := RepoChange{Name: name, Files: len(after.Files), Digest: after.Digest, First: len(before.Files) == 0}
	for p, d := range after.Files {
		switch old, ok := before.Files[p]; {
		case !ok:
			rc.Added = append(rc.Added, p)
		case old != d:
			rc.Changed = append(rc.Changed, p)
		}
	}
	for p := range before.Files {
		if _, ok := after.Files[p]; !ok {
			rc.Removed = append(rc.Removed, p)
		}
	}
	sort.Strings(rc.Added)
	sort.Strings(rc.Changed)
	sort.Strings(rc.Removed)
	return rc
}

// LockRecipes pins the content of every repository in dir's lock file:
// it fetches git repositories into cacheDir as loads do, records the
// SHA-256 of each .star file and the tree digest, and rewrites the lock
// file. It reports the lock and which pinned files changed. A git pin's
// digests come from its commit, proven from the commit's objects: a
// cached copy that is not the commit is refused, and so are digests
// locked for the same commit that differ from its content (tampering).
func LockRecipes(dir, cacheDir string) (LockReport, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return LockReport{}, err
	}
	lk, lockPath, err := readLock(root)
	report := LockReport{Path: lockPath}
	if errors.Is(err, os.ErrNotExist) {
		return report, fmt.Errorf("there is no %s in %s: create it with the repositories to pin, e.g. {\"recipes\": {\"platform\": {\"path\": \"../platform\"}}}", LockFile, root)
	}
	if err != nil {
		return report, err
	}
	if lk.Recipes == nil {
		lk.Recipes = map[string]LockEntry{}
	}
	l := newLoader(&Host{opts: Options{CacheDir: cacheDir}})
	names := make([]string, 0, len(lk.Recipes))
	for n := range lk.Recipes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		e := lk.Recipes[name]
		before := e
		repo, files, err := l.repoDir(root, name, e, lockPath)
		if err != nil {
			return report, err
		}
		if e.Git == "" {
			if files, err = hashStarFiles(repo); err != nil {
				return report, fmt.Errorf("repository @%s: %w", name, err)
			}
		}
		if len(files) == 0 {
			return report, fmt.Errorf("repository @%s (%s) has no .star files to pin: check its path in %s or remove it from there", name, repo, lockPath)
		}
		if e.Git != "" {
			if err := relockable(name, lockPath, before, files); err != nil {
				return report, err
			}
			e.Files, e.Digest = files, CommitDigest(e.Commit, files)
		} else {
			e.Files, e.Digest = files, TreeDigest(files)
		}
		lk.Recipes[name] = e
		report.Repos = append(report.Repos, diffFiles(name, before, e))
	}
	data, err := json.MarshalIndent(lk, "", "  ")
	if err != nil {
		return report, err
	}
	if err := paths.WriteFileAtomic(lockPath, append(data, '\n'), 0o644); err != nil {
		return report, err
	}
	report.Lock = lk
	return report, nil
}

// hashStarFiles returns the digest of every .star file below dir by slash
// path, skipping hidden directories (.git).
func hashStarFiles(dir string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(d.Name(), ".star") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = FileDigest(data)
		return nil
	})
	return files, err
}
