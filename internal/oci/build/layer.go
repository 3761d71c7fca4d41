// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package build

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"podmin.dev/podmin/internal/progress"
)

// epoch is every timestamp in a built image, so builds are reproducible.
var epoch = time.Unix(0, 0).UTC()

// entry is one file system object of a layer.
type entry struct {
	mode     int64
	uid, gid int
	typ      byte
	link     string
	src      string // file to read for regular files
	size     int64
}

// layerEntries returns the file system objects of one COPY step by path.
func (c *buildContext) layerEntries(step copyStep) (map[string]entry, error) {
	var matches []string
	for _, src := range step.srcs {
		m, err := c.match(src)
		if err != nil {
			return nil, fmt.Errorf("line %d: COPY: %w", step.line, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("line %d: COPY: %q matches nothing in the build context %s: check the path and .dockerignore", step.line, src, c.dir)
		}
		matches = append(matches, m...)
	}
	dirDst := strings.HasSuffix(step.dst, "/")
	if len(matches) > 1 && !dirDst {
		return nil, fmt.Errorf("line %d: COPY: several sources need a directory destination ending in '/', got %q", step.line, step.dst)
	}
	dst := strings.TrimSuffix(step.dst, "/")
	if dst == "" {
		dst = "/"
	}
	entries := map[string]entry{}
	owner := func(e entry) entry {
		if step.chown {
			e.uid, e.gid = step.uid, step.gid
		}
		if step.chmod >= 0 && e.typ != tar.TypeSymlink {
			e.mode = step.chmod
		}
		return e
	}
	for _, m := range matches {
		info, isEntry := c.entries[m]
		if m == "." || (isEntry && info.IsDir()) {
			entries[dst] = owner(entry{typ: tar.TypeDir, mode: 0o755})
			for _, p := range c.below(m) {
				rel := p
				if m != "." {
					rel = strings.TrimPrefix(p, m+"/")
				}
				e, err := c.entry(p)
				if err != nil {
					return nil, err
				}
				entries[path.Join(dst, rel)] = owner(e)
			}
			continue
		}
		target := dst
		if dirDst {
			target = path.Join(dst, path.Base(m))
			entries[dst] = owner(entry{typ: tar.TypeDir, mode: 0o755})
		}
		e, err := c.entry(m)
		if err != nil {
			return nil, err
		}
		entries[target] = owner(e)
	}
	for name := range entries {
		for dir := path.Dir(name); dir != "/" && dir != "."; dir = path.Dir(dir) {
			if _, ok := entries[dir]; !ok {
				entries[dir] = entry{typ: tar.TypeDir, mode: 0o755}
			}
		}
	}
	delete(entries, "/")
	return entries, nil
}

// entry describes one context path with normalised permissions: 0755 for
// directories and executables, 0644 for other files, so umask and
// checkout differences do not change the digest.
func (c *buildContext) entry(rel string) (entry, error) {
	info := c.entries[rel]
	full := filepath.Join(c.dir, filepath.FromSlash(rel))
	switch {
	case info.IsDir():
		return entry{typ: tar.TypeDir, mode: 0o755}, nil
	case info.Mode()&fs.ModeSymlink != 0:
		link, err := os.Readlink(full)
		if err != nil {
			return entry{}, err
		}
		return entry{typ: tar.TypeSymlink, mode: 0o777, link: link}, nil
	case info.Mode().IsRegular():
		mode := int64(0o644)
		if info.Mode()&0o111 != 0 {
			mode = 0o755
		}
		return entry{typ: tar.TypeReg, mode: mode, src: full, size: info.Size()}, nil
	}
	return entry{}, fmt.Errorf("%s is neither a file, a directory nor a symbolic link: remove it from the context or add it to .dockerignore", full)
}

// writeTar writes the tar of entries to w, in path order, reading each
// file as it goes.
func writeTar(w io.Writer, entries map[string]entry, it progress.Item) error {
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, n := range names {
		e := entries[n]
		h := &tar.Header{
			Name: strings.TrimPrefix(n, "/"), Mode: e.mode, Uid: e.uid, Gid: e.gid,
			Typeflag: e.typ, Linkname: e.link, ModTime: epoch, Format: tar.FormatPAX,
		}
		if e.typ == tar.TypeDir {
			h.Name += "/"
		}
		if e.typ == tar.TypeReg {
			h.Size = e.size
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("layer entry %s: %w", n, err)
		}
		if e.typ == tar.TypeReg {
			if err := copyFile(tw, e.src, e.size, it); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

func copyFile(w io.Writer, file string, size int64, it progress.Item) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(w, progress.Reader(it, io.LimitReader(f, size)))
	if err == nil && n != size {
		err = fmt.Errorf("%s changed size during the build: build again", file)
	}
	return err
}
