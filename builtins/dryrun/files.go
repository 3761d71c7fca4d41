// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dryrun

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/objstore/overlay"
)

// fileLayer keeps the files a dry run writes in memory: later reads see
// them, the real path is never touched.
type fileLayer struct {
	seq  *overlay.Sequence
	real openv.Files
	// cache maps a path below the dry run's scratch cache to the real
	// cache it stands for; nil maps nothing.
	cache func(string) string

	mu    sync.Mutex
	files map[string][]byte
	dirs  map[string]bool
	recs  []record
}

func clean(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}

// Open implements openv.Files.
func (l *fileLayer) Open(path string) (io.ReadCloser, error) {
	l.mu.Lock()
	data, ok := l.files[clean(path)]
	l.mu.Unlock()
	if ok {
		return io.NopCloser(bytes.NewReader(data)), nil
	}
	return l.real.Open(path)
}

// exists reports whether path exists in the layer or for real; the caller
// holds l.mu.
func (l *fileLayer) exists(path string) (bool, []byte) {
	if data, ok := l.files[path]; ok {
		return true, data
	}
	if l.dirs[path] {
		return true, nil
	}
	rc, err := l.real.Open(path)
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist), nil
	}
	defer rc.Close()
	data, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
	return true, data
}

func (l *fileLayer) write(path string, data []byte, create bool) error {
	p := clean(path)
	l.mu.Lock()
	defer l.mu.Unlock()
	existed, before := l.exists(p)
	if create && existed {
		return &fs.PathError{Op: "create", Path: path, Err: fs.ErrExist}
	}
	if !l.dirExists(filepath.Dir(p)) {
		return &fs.PathError{Op: "write", Path: path, Err: fs.ErrNotExist}
	}
	if l.files == nil {
		l.files = map[string][]byte{}
	}
	data = append([]byte(nil), data...)
	l.files[p] = data
	l.recs = append(l.recs, record{seq: l.seq.Next(), kind: KindFile, where: filepath.Dir(p), target: p,
		before: state{exists: existed, data: before}, after: state{exists: true, data: data}})
	return nil
}

// dirExists reports a directory in the layer or for real; the caller
// holds l.mu.
func (l *fileLayer) dirExists(dir string) bool {
	if l.dirs[dir] {
		return true
	}
	st, err := os.Stat(dir)
	return err == nil && st.IsDir()
}

// CreateNew implements openv.Files.
func (l *fileLayer) CreateNew(path string, data []byte, _ fs.FileMode) error {
	return l.write(path, data, true)
}

// WriteFile implements openv.Files.
func (l *fileLayer) WriteFile(path string, data []byte, _ fs.FileMode) error {
	return l.write(path, data, false)
}

// MkdirAll implements openv.Files: missing directories are recorded.
func (l *fileLayer) MkdirAll(path string, _ fs.FileMode) error {
	p := clean(path)
	l.mu.Lock()
	defer l.mu.Unlock()
	var missing []string
	for d := p; !l.dirExists(d); d = filepath.Dir(d) {
		if _, ok := l.files[d]; ok {
			return &fs.PathError{Op: "mkdir", Path: d, Err: errors.New("not a directory")}
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if l.dirs == nil {
		l.dirs = map[string]bool{}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		l.dirs[missing[i]] = true
		l.recs = append(l.recs, record{seq: l.seq.Next(), kind: KindDir, where: filepath.Dir(missing[i]), target: missing[i],
			after: state{exists: true}})
	}
	return nil
}

// RemoveAll implements openv.Files: an existing directory's removal
// is recorded, and the layer forgets what it wrote below it; the real
// tree stays.
func (l *fileLayer) RemoveAll(path string) error {
	p := clean(path)
	if l.cache != nil {
		p = l.cache(p)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.dirExists(p) {
		return nil
	}
	for f := range l.files {
		if strings.HasPrefix(f, p+string(filepath.Separator)) {
			delete(l.files, f)
		}
	}
	for d := range l.dirs {
		if d == p || strings.HasPrefix(d, p+string(filepath.Separator)) {
			delete(l.dirs, d)
		}
	}
	l.recs = append(l.recs, record{seq: l.seq.Next(), kind: KindDir, where: filepath.Dir(p), target: p,
		before: state{exists: true}})
	return nil
}

func (l *fileLayer) records() []record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]record(nil), l.recs...)
}
