// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dryrun

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"podmin.dev/podmin/internal/objstore/overlay"
)

// imageStore is the dry run's local image store: a scratch copy of the real
// one made of hard links. The store writes only by rename, so a write
// replaces the scratch link and never the real file. Changes are found by
// comparing each repository's index.json at every mark.
type imageStore struct {
	seq   *overlay.Sequence
	cache string // the scratch cache directory the Env uses
	where string // the real image store, for the plan

	mu   sync.Mutex
	last map[string][]byte // repository → index.json at the last mark
	recs []record
}

// imageScratch builds the scratch image store for the real cache dir.
func (r *Recorder) imageScratch(realCache string) (*imageStore, error) {
	realImages := filepath.Join(realCache, "images")
	parent := ""
	if isDir(realImages) || isDir(filepath.Join(realCache, "dependencies")) {
		parent = realCache // same file system, so hard links work
	}
	dir, err := os.MkdirTemp(parent, ".podmin-dry-run-")
	if err != nil && parent != "" {
		// A read-only cache: copy into the temporary directory instead.
		dir, err = os.MkdirTemp("", ".podmin-dry-run-")
	}
	if err != nil {
		return nil, fmt.Errorf("dry run scratch directory: %w", err)
	}
	r.mu.Lock()
	r.scratch = dir
	r.mu.Unlock()
	s := &imageStore{seq: &r.seq, cache: dir, where: realImages}
	if parent != "" && isDir(realImages) {
		if err := linkTree(realImages, filepath.Join(dir, "images"), true); err != nil {
			_ = r.Close()
			return nil, fmt.Errorf("dry run copy of the local image store: %w", err)
		}
	}
	// The verified dependency downloads are reused the same way (the
	// cache too writes only by rename); a file that cannot be linked is
	// left out, and the dry run downloads it into its scratch copy.
	if realDeps := filepath.Join(realCache, "dependencies"); isDir(realDeps) {
		if err := linkTree(realDeps, filepath.Join(dir, "dependencies"), false); err != nil {
			_ = r.Close()
			return nil, fmt.Errorf("dry run copy of the dependency cache: %w", err)
		}
	}
	s.last = s.snapshot()
	return s, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// linkTree recreates src's directories below dst and hard-links its files,
// copying a file that cannot be linked when copyUnlinkable is set and leaving it out
// otherwise.
func linkTree(src, dst string, copyUnlinkable bool) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		if err := os.Link(p, target); err == nil || !copyUnlinkable {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}

// snapshot reads every repository's index.json.
func (s *imageStore) snapshot() map[string][]byte {
	out := map[string][]byte{}
	root := filepath.Join(s.cache, "images")
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if d.IsDir() && d.Name() == "blobs" {
			return fs.SkipDir
		}
		if !d.IsDir() && d.Name() == "index.json" {
			if data, err := os.ReadFile(p); err == nil {
				rel, _ := filepath.Rel(root, filepath.Dir(p))
				out[filepath.ToSlash(rel)] = data
			}
		}
		return nil
	})
	return out
}

// mark records the repositories whose index changed since the last mark.
func (s *imageStore) mark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.snapshot()
	repos := make([]string, 0, len(now))
	for repo := range now {
		repos = append(repos, repo)
	}
	sort.Strings(repos)
	for _, repo := range repos {
		data := now[repo]
		old, ok := s.last[repo]
		if ok && bytes.Equal(old, data) {
			continue
		}
		s.recs = append(s.recs, record{seq: s.seq.Next(), kind: KindImage, where: "local image store " + s.where, target: repo,
			before: state{exists: ok, data: old}, after: state{exists: true, data: data}})
	}
	s.last = now
}

func (s *imageStore) records() []record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]record(nil), s.recs...)
}
