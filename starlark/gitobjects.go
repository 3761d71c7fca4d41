// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1" //nolint:gosec // git's object IDs are SHA-1: the pinned commit is one
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// treeEntry is one path of a commit: its git mode and object ID.
type treeEntry struct {
	mode string
	id   string
}

const (
	modeTree    = "40000"
	modeSymlink = "120000"
	modeGitlink = "160000"
)

// errCorrupt marks a clone whose objects do not hash to their IDs.
var errCorrupt = errors.New("corrupt object")

// objectReader reads objects of one repository through a long-running
// "git cat-file --batch" and checks each against its ID.
type objectReader struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func newObjectReader(dir string) (*objectReader, error) {
	cmd := exec.CommandContext(context.Background(), "git", "cat-file", "--batch")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	return &objectReader{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

func (r *objectReader) close() {
	_ = r.in.Close()
	_ = r.cmd.Wait()
}

// read returns the content of object id, which must be of type typ and
// hash to id.
func (r *objectReader) read(id, typ string) ([]byte, error) {
	if _, err := io.WriteString(r.in, id+"\n"); err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	header, err := r.out.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	f := strings.Fields(header)
	if len(f) == 2 && f[1] == "missing" {
		return nil, fmt.Errorf("%w: %s %s is missing", errCorrupt, typ, id)
	}
	if len(f) != 3 || f[0] != id {
		return nil, fmt.Errorf("git cat-file: unexpected reply %q for %s", strings.TrimSpace(header), id)
	}
	size, err := strconv.Atoi(f[2])
	if err != nil || size < 0 {
		return nil, fmt.Errorf("git cat-file: unexpected size in %q", strings.TrimSpace(header))
	}
	data := make([]byte, size+1) // the content and a newline
	if _, err := io.ReadFull(r.out, data); err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	data = data[:size]
	if f[1] != typ {
		return nil, fmt.Errorf("%w: %s is a %s, not a %s", errCorrupt, id, f[1], typ)
	}
	if got := objectID(typ, data); got != id {
		return nil, fmt.Errorf("%w: %s %s hashes to %s", errCorrupt, typ, id, got)
	}
	return data, nil
}

// objectID is git's SHA-1 object ID of content of type typ.
func objectID(typ string, content []byte) string {
	h := sha1.New() //nolint:gosec // git's object format
	fmt.Fprintf(h, "%s %d\x00", typ, len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// commitFiles returns every path of commit's tree (directories included),
// each object proven by the commit's ID.
func commitFiles(dir, commit string) (map[string]treeEntry, error) {
	r, err := newObjectReader(dir)
	if err != nil {
		return nil, err
	}
	defer r.close()
	c, err := r.read(commit, "commit")
	if err != nil {
		return nil, err
	}
	first, _, _ := bytes.Cut(c, []byte("\n"))
	tree, ok := strings.CutPrefix(string(first), "tree ")
	if !ok || len(tree) != 40 {
		return nil, fmt.Errorf("%w: commit %s names no tree", errCorrupt, commit)
	}
	out := map[string]treeEntry{}
	return out, walkTree(r, tree, "", out)
}

func walkTree(r *objectReader, id, prefix string, out map[string]treeEntry) error {
	data, err := r.read(id, "tree")
	if err != nil {
		return err
	}
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		nul := bytes.IndexByte(data, 0)
		if sp <= 0 || nul <= sp || len(data) < nul+21 {
			return fmt.Errorf("%w: tree %s cannot be parsed", errCorrupt, id)
		}
		mode, name := string(data[:sp]), string(data[sp+1:nul])
		child := hex.EncodeToString(data[nul+1 : nul+21])
		data = data[nul+21:]
		if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
			return fmt.Errorf("%w: tree %s holds the name %q", errCorrupt, id, name)
		}
		p := prefix + name
		out[p] = treeEntry{mode: mode, id: child}
		if mode == modeTree {
			if err := walkTree(r, child, p+"/", out); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkoutDiff compares the working tree at dir with the commit's paths
// and returns what differs ("modified x", "added y", "missing z",
// "changed type of w"), and the lock digests of the commit's .star files
// as hashStarFiles selects them, computed from the bytes that were
// proven to be the commit's.
func checkoutDiff(dir string, want map[string]treeEntry) (diffs []string, star map[string]string, err error) {
	star = map[string]string{}
	seen := map[string]bool{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == ".git" {
			return filepath.SkipDir
		}
		e, ok := want[rel]
		seen[rel] = ok
		switch {
		case d.IsDir() && (!ok || e.mode == modeTree || e.mode == modeGitlink):
			// A directory is what its files are: an empty one git would
			// not record either; a submodule is not cloned.
			return nil
		case !ok:
			diffs = append(diffs, "added "+rel)
			return nil
		case d.IsDir() || e.mode == modeTree || e.mode == modeGitlink || (d.Type()&fs.ModeSymlink != 0) != (e.mode == modeSymlink):
			diffs = append(diffs, "changed type of "+rel)
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		data, digest, err := checkedOutBlob(p, d, hiddenDir(rel) || !strings.HasSuffix(rel, ".star"))
		if err != nil {
			return err
		}
		if digest != e.id {
			diffs = append(diffs, "modified "+rel)
			return nil
		}
		if data != nil && d.Type().IsRegular() {
			star[rel] = FileDigest(data)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var missing []string
	for p, e := range want {
		if e.mode != modeTree && e.mode != modeGitlink && !seen[p] {
			missing = append(missing, "missing "+p)
		}
	}
	sort.Strings(missing)
	return append(diffs, missing...), star, nil
}

// hiddenDir reports whether a slash path lies below a directory whose
// name starts with '.', which the lock's file set leaves out.
func hiddenDir(rel string) bool {
	parts := strings.Split(rel, "/")
	for _, d := range parts[:len(parts)-1] {
		if strings.HasPrefix(d, ".") {
			return true
		}
	}
	return false
}

// checkedOutBlob returns the blob ID of a working-tree file (a symlink's
// target for a symlink) and, unless stream, its bytes: the .star files
// are hashed for the lock from the same bytes that were proven.
func checkedOutBlob(p string, d fs.DirEntry, stream bool) ([]byte, string, error) {
	if d.Type()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(p)
		if err != nil {
			return nil, "", err
		}
		return nil, objectID("blob", []byte(target)), nil
	}
	if !d.Type().IsRegular() {
		return nil, "", nil // a device or a socket is never a commit's
	}
	if !stream {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, "", err
		}
		return data, objectID("blob", data), nil
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, "", err
	}
	var h hash.Hash = sha1.New() //nolint:gosec // git's object format
	fmt.Fprintf(h, "blob %d\x00", st.Size())
	if n, err := io.Copy(h, f); err != nil || n != st.Size() {
		return nil, "", fmt.Errorf("read %s: the file changed while it was read (%d of %d bytes): %v", p, n, st.Size(), err)
	}
	return nil, hex.EncodeToString(h.Sum(nil)), nil
}
