// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"podmin.dev/podmin/internal/paths"
)

// A recipe update is planned first and written second, so the operator
// reviews exactly what the lock will accept: PlanRecipeAdd and
// PlanRecipeUpdate fetch the new pin (proving it as a load does) and diff
// every .star file against the content pinned now; Apply writes the lock
// only if it is still the file the plan was made from.

// RecipeUpdate is a planned change of podmin.star.lock.
type RecipeUpdate struct {
	LockPath string
	Changes  []RecipeChange
	// raw is the lock file the plan read (nil when it did not exist), so
	// Apply never overwrites a lock that changed in between.
	raw  []byte
	lock *Lock
}

// RecipeChange is the planned change of one repository's pin.
type RecipeChange struct {
	Name string
	// Before is the pin in the lock now (zero for a new repository),
	// After the pin the lock gets.
	Before, After LockEntry
	New           bool
	Files         []FileChange
	// Note says why some content is not shown, when it cannot be.
	Note string
	// Err is why the repository could not be updated: it keeps its pin,
	// and the others are still updated.
	Err error
}

// FileChange is one .star file that a change adds, changes or removes,
// with its line diff ("-", "+", " " lines; "..." for skipped unchanged
// lines), or nil when the earlier content is not available.
type FileChange struct {
	Path   string
	Status string // "added", "changed" or "removed"
	Diff   []string
}

// Changed reports whether the change moves the pin or its content.
func (c RecipeChange) Changed() bool {
	if c.Err != nil {
		return false
	}
	return c.New || c.Before.Commit != c.After.Commit || c.Before.Ref != c.After.Ref || c.Before.Digest != c.After.Digest || c.Before.Git != c.After.Git || c.Before.Path != c.After.Path
}

// Changed reports whether applying the update changes the lock.
func (u *RecipeUpdate) Changed() bool {
	for _, c := range u.Changes {
		if c.Changed() {
			return true
		}
	}
	return false
}

var repoNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// RecipeSource is where "podmin recipes add" pins a repository: a git
// repository at a pin (a commit, or a branch or tag resolved to its
// commit), or a local directory.
type RecipeSource struct {
	Git, Pin string
	Path     string
}

// ParseRecipeSource reads SOURCE@PIN (git; the pin is what follows the
// last "@") or a directory without a pin (a local path).
func ParseRecipeSource(s string) (RecipeSource, error) {
	if i := strings.LastIndex(s, "@"); i > 0 && i < len(s)-1 && !strings.Contains(s[i+1:], ":") {
		return RecipeSource{Git: s[:i], Pin: s[i+1:]}, nil
	}
	if st, err := os.Stat(s); err == nil && st.IsDir() {
		return RecipeSource{Path: s}, nil
	}
	return RecipeSource{}, fmt.Errorf("source %q is neither GIT@PIN nor a local directory: give a git repository with the commit, branch or tag to pin, e.g. https://example.com/recipes.git@v1.2.0, or the path of a directory", s)
}

// ErrRecipeName is wrapped by the error for a repository name that
// load("@NAME//…") could not name.
var ErrRecipeName = errors.New("invalid repository name")

// PlanRecipeAdd plans pinning a new repository name in dir's lock file
// (created when there is none): a git source is fetched at its pin into
// cacheDir and proven to be the commit, a path is hashed as it is.
func PlanRecipeAdd(dir, cacheDir, name string, src RecipeSource) (*RecipeUpdate, error) {
	if !repoNameRE.MatchString(name) || name == ".." {
		return nil, fmt.Errorf("%w %q: use letters, digits, \"_\", \".\" and \"-\", as in load(\"@%s//file.star\")", ErrRecipeName, name, "platform")
	}
	u, root, err := planBase(dir)
	if err != nil {
		return nil, err
	}
	if _, ok := u.lock.Recipes[name]; ok {
		return nil, fmt.Errorf("repository @%s is already pinned in %s: run \"podmin recipes update %s\" to move its pin", name, u.LockPath, name)
	}
	l := newLoader(&Host{opts: Options{CacheDir: cacheDir}})
	var after LockEntry
	if src.Git != "" {
		git := src.Git
		if st, err := os.Stat(git); err == nil && st.IsDir() {
			// The clone runs in a temporary directory: a relative path would
			// name another place there.
			if git, err = filepath.Abs(git); err != nil {
				return nil, err
			}
		}
		commit, ref, err := resolvePin(git, src.Pin)
		if err != nil {
			return nil, fmt.Errorf("repository @%s: %w", name, err)
		}
		after = LockEntry{Git: git, Commit: commit, Ref: ref}
	} else {
		abs, err := filepath.Abs(src.Path)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(root, abs)
		if err != nil {
			return nil, err
		}
		after = LockEntry{Path: filepath.ToSlash(rel)}
	}
	c, err := planChange(l, root, u.LockPath, name, LockEntry{}, after, true)
	if err != nil {
		return nil, err
	}
	u.Changes = []RecipeChange{c}
	u.lock.Recipes[name] = c.After
	return u, nil
}

// PlanRecipeUpdate plans moving the named repositories (all when names is
// empty) of dir's lock file to a new pin: a git repository to the commit
// of to, or else of its recorded ref, or else of the remote's HEAD; a
// local path to its content now. Each file's diff is against the content
// pinned now.
func PlanRecipeUpdate(dir, cacheDir string, names []string, to string) (*RecipeUpdate, error) {
	u, root, err := planBase(dir)
	if err != nil {
		return nil, err
	}
	if u.raw == nil {
		return nil, fmt.Errorf("there is no %s in %s: pin a repository with \"podmin recipes add NAME SOURCE@PIN\"", LockFile, root)
	}
	if to != "" && len(names) != 1 {
		return nil, fmt.Errorf("--to moves one repository: name it, as in \"podmin recipes update NAME --to PIN\"")
	}
	if len(names) == 0 {
		for n := range u.lock.Recipes {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	l := newLoader(&Host{opts: Options{CacheDir: cacheDir}})
	for _, name := range names {
		before, ok := u.lock.Recipes[name]
		if !ok {
			return nil, fmt.Errorf("repository @%s is not in %s: pin it with \"podmin recipes add %s SOURCE@PIN\"", name, u.LockPath, name)
		}
		if before.Path != "" && to != "" {
			return nil, fmt.Errorf("repository @%s is the local path %s, which has no pins: drop --to", name, before.Path)
		}
	}
	for _, name := range names {
		before := u.lock.Recipes[name]
		c, err := planUpdate(l, root, u.LockPath, name, before, to)
		if err != nil {
			// One repository that cannot be updated keeps its pin; the
			// others are still reviewed.
			c = RecipeChange{Name: name, Before: before, Err: err}
		} else {
			u.lock.Recipes[name] = c.After
		}
		u.Changes = append(u.Changes, c)
	}
	return u, nil
}

// Failed returns the error of each repository that could not be updated.
func (u *RecipeUpdate) Failed() error {
	var errs []error
	for _, c := range u.Changes {
		if c.Err != nil {
			errs = append(errs, c.Err)
		}
	}
	return errors.Join(errs...)
}

// planUpdate moves one repository's pin (see PlanRecipeUpdate).
func planUpdate(l *loader, root, lockPath, name string, before LockEntry, to string) (RecipeChange, error) {
	after := LockEntry{Path: before.Path, Git: before.Git, Commit: before.Commit, Ref: before.Ref}
	if before.Git != "" {
		pin := to
		if pin == "" {
			pin = cmpOr(before.Ref, "HEAD")
		}
		commit, ref, err := resolvePin(before.Git, pin)
		if err != nil {
			return RecipeChange{}, fmt.Errorf("repository @%s: %w", name, err)
		}
		after.Commit, after.Ref = commit, ref
		if pin == "HEAD" && to == "" {
			// Following the default branch is not a ref to record.
			after.Ref = ""
		}
	}
	return planChange(l, root, lockPath, name, before, after, false)
}

// planBase reads dir's lock file, or starts an empty one.
func planBase(dir string) (*RecipeUpdate, string, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, "", err
	}
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		return nil, "", fmt.Errorf("the recipe root %s is not a directory: check --dir", root)
	}
	u := &RecipeUpdate{LockPath: filepath.Join(root, LockFile), lock: &Lock{}}
	raw, err := os.ReadFile(u.LockPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, "", err
	default:
		lk, _, err := readLock(root)
		if err != nil {
			return nil, "", err
		}
		u.raw, u.lock = raw, lk
	}
	if u.lock.Recipes == nil {
		u.lock.Recipes = map[string]LockEntry{}
	}
	return u, root, nil
}

// planChange fetches after's content and diffs it against before's.
func planChange(l *loader, root, lockPath, name string, before, after LockEntry, isNew bool) (RecipeChange, error) {
	c := RecipeChange{Name: name, Before: before, New: isNew}
	newDir, files, err := l.repoDir(root, name, after, lockPath)
	if err != nil {
		return c, err
	}
	if after.Git == "" {
		if files, err = hashStarFiles(newDir); err != nil {
			return c, fmt.Errorf("repository @%s: %w", name, err)
		}
	}
	if len(files) == 0 {
		return c, fmt.Errorf("repository @%s (%s) has no .star files to pin: check the source", name, cmpOr(after.Git, newDir))
	}
	after.Files = files
	if after.Git != "" {
		after.Digest = CommitDigest(after.Commit, files)
	} else {
		after.Digest = TreeDigest(files)
	}
	c.After = after
	// The content pinned now: a git pin's from its commit (proven, as a
	// load does); a path keeps only digests, its earlier bytes are gone.
	oldDir, oldFiles := "", before.Files
	var proven map[string]string
	switch {
	case isNew:
	case before.Git != "" && before.Commit == after.Commit && before.Git == after.Git:
		oldDir, proven = newDir, files
	case before.Git != "":
		d, f, err := l.repoDir(root, name, before, lockPath)
		switch {
		case errors.Is(err, ErrFetchRepository):
			c.Note = fmt.Sprintf("commit %s could not be fetched (%v), so only which files changed is shown, from the digests in the lock", before.Commit, err)
		case err != nil:
			return c, err
		default:
			oldDir, proven = d, f
		}
	default:
		c.Note = "a local path keeps no earlier content, so a changed file's diff is not shown: review it with its version control"
	}
	if proven != nil {
		// Digests locked for the old commit that are not its content were
		// tampered with: the diff would be against something never pinned.
		if err := relockable(name, lockPath, before, proven); err != nil {
			return c, err
		}
		oldFiles = proven
	}
	paths := map[string]bool{}
	for p := range files {
		paths[p] = true
	}
	for p := range oldFiles {
		paths[p] = true
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	for _, p := range sorted {
		oldD, had := oldFiles[p]
		newD, has := files[p]
		fc := FileChange{Path: p}
		switch {
		case had && has && oldD == newD:
			continue
		case !had:
			fc.Status = "added"
		case !has:
			fc.Status = "removed"
		default:
			fc.Status = "changed"
		}
		var oldText, newText []byte
		oldKnown := !had || oldDir != ""
		if had && oldDir != "" {
			if oldText, err = readPinnedFile(name, oldDir, p, oldD); err != nil {
				return c, err
			}
		}
		if has {
			if newText, err = readPinnedFile(name, newDir, p, newD); err != nil {
				return c, err
			}
		}
		if oldKnown {
			fc.Diff = fileDiff(oldText, newText)
		}
		c.Files = append(c.Files, fc)
	}
	return c, nil
}

// readPinnedFile reads a file of a proven or hashed repository copy and
// checks it still has the digest it was proven with, so a copy edited
// after it was checked is refused, never shown as the pin's content.
func readPinnedFile(name, dir, rel, want string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		return nil, fmt.Errorf("repository @%s: %w", name, err)
	}
	if got := FileDigest(data); got != want {
		return nil, fmt.Errorf("repository @%s: %s in %s changed while it was compared (its content is %s, not %s): nothing was changed: run the command again, and remove the copy if it is a cached clone", name, rel, dir, got, want)
	}
	return data, nil
}

// fileDiff is the line diff of one file; binary content is summarised.
func fileDiff(before, after []byte) []string {
	if !isText(before) || !isText(after) {
		return []string{fmt.Sprintf("%d bytes -> %d bytes (binary)", len(before), len(after))}
	}
	return textDiff(string(before), string(after))
}

// resolvePin returns the commit a pin names in the git repository at
// source: a full commit as it is, a branch, tag or HEAD from the
// repository's refs (a tag peeled to its commit). ref is the pin when it
// is a name that may move, "" for a commit.
func resolvePin(source, pin string) (commit, ref string, err error) {
	if commitRE.MatchString(strings.ToLower(pin)) {
		return strings.ToLower(pin), "", nil
	}
	out, err := git("", "ls-remote", "--", source)
	if err != nil {
		return "", "", fetchFailed{fmt.Errorf("list the refs of %s: %w", source, err)}
	}
	refs := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		id, name, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if ok {
			refs[name] = id
		}
	}
	candidates := []string{pin}
	if pin != "HEAD" && !strings.HasPrefix(pin, "refs/") {
		candidates = []string{"refs/heads/" + pin, "refs/tags/" + pin}
	}
	var found []string
	for _, c := range candidates {
		if id, ok := refs[c+"^{}"]; ok {
			found = append(found, c)
			commit = id
		} else if id, ok := refs[c]; ok {
			found = append(found, c)
			commit = id
		}
	}
	switch len(found) {
	case 0:
		return "", "", fmt.Errorf("%s has no branch or tag %q: give a commit (40 hex digits), a branch or a tag of it", source, pin)
	case 1:
		return commit, pin, nil
	}
	return "", "", fmt.Errorf("%q is both a branch and a tag of %s: give refs/heads/%s or refs/tags/%s", pin, source, pin, pin)
}

// Apply writes the planned lock, refusing when the lock file changed
// since the plan read it: the operator reviewed a diff against it.
func (u *RecipeUpdate) Apply() error {
	raw, err := os.ReadFile(u.LockPath)
	if errors.Is(err, os.ErrNotExist) {
		raw, err = nil, nil
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(raw, u.raw) {
		return fmt.Errorf("%s changed since its diff was shown; it was not overwritten: run the command again to review the new diff", u.LockPath)
	}
	data, err := json.MarshalIndent(u.lock, "", "  ")
	if err != nil {
		return err
	}
	return paths.WriteFileAtomic(u.LockPath, append(data, '\n'), 0o644)
}
