// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package openv

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/paths"
)

// The boundaries below are every place an operation writes outside the
// cluster bucket and the secrets stores. The defaults write for real; a dry
// run substitutes recording implementations and a recipe test substitutes
// sandboxed ones, and the operations cannot tell.

// ContextsFile is the saved contexts.
type ContextsFile interface {
	// Load returns the contexts; a missing file is an empty one.
	Load() (*contexts.File, error)
	// Update applies fn under a lock and saves the result; nothing is
	// saved when fn fails.
	Update(fn func(*contexts.File) error) error
}

// Files are the local files operations read (manifests) and write
// (init's manifest, preview's out=). Paths are absolute or relative to
// the process's working directory; the operations resolve WorkDir first.
type Files interface {
	// Open opens a file for reading.
	Open(path string) (io.ReadCloser, error)
	// CreateNew writes a new file whose content appears complete or not
	// at all; an existing path is an error matching fs.ErrExist.
	CreateNew(path string, data []byte, perm fs.FileMode) error
	// WriteFile replaces path atomically.
	WriteFile(path string, data []byte, perm fs.FileMode) error
	// MkdirAll creates a directory and its missing parents.
	MkdirAll(path string, perm fs.FileMode) error
	// RemoveAll removes a directory tree Podmin generated; an absent path
	// is no error.
	RemoveAll(path string) error
}

// ReadJail is implemented by Files that allow reads only in some places (a
// recipe test's sandbox and its directory). Operations that read through
// another path than Files.Open (build walks its context directory) ask it
// which path to read; an error refuses the read.
type ReadJail interface {
	ReadPath(path string) (string, error)
}

// ReadPath returns the path a read of path uses: path itself, unless the
// Files boundary is a ReadJail.
func (e *Env) ReadPath(path string) (string, error) {
	if j, ok := e.LocalFiles().(ReadJail); ok {
		return j.ReadPath(path)
	}
	return path, nil
}

// ReadUserFile reads a file the operator named (a secret value's file=),
// relative to WorkDir, through the Files boundary; a file longer than
// limit bytes is an error.
func (e *Env) ReadUserFile(name string, limit int64) ([]byte, error) {
	f, err := e.LocalFiles().Open(e.Path(name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is longer than %d bytes", name, limit)
	}
	return data, nil
}

// SavedContexts returns the contexts boundary: Contexts, else the file in Dirs.Config.
func (e *Env) SavedContexts() ContextsFile {
	if e.Contexts != nil {
		return e.Contexts
	}
	return ConfigContexts{Dir: e.Dirs.Config}
}

// LocalFiles returns the local files boundary: Files, else the real file system.
func (e *Env) LocalFiles() Files {
	if e.Files != nil {
		return e.Files
	}
	return OSFiles{}
}

// RemoteOptions reach registries with the operator's docker credentials,
// through Transport when one is set.
func (e *Env) RemoteOptions() []remote.Option {
	opts := []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if e.Transport != nil {
		opts = append(opts, remote.WithTransport(e.Transport))
	}
	return opts
}

// ConfigContexts is the contexts file in a config directory.
type ConfigContexts struct {
	Dir string
}

// Load implements ContextsFile.
func (c ConfigContexts) Load() (*contexts.File, error) { return contexts.Load(c.Dir) }

// Update implements ContextsFile.
func (c ConfigContexts) Update(fn func(*contexts.File) error) error {
	return contexts.Update(c.Dir, fn)
}

// OSFiles is the real file system.
type OSFiles struct{}

// Open implements Files.
func (OSFiles) Open(path string) (io.ReadCloser, error) { return os.Open(path) }

// MkdirAll implements Files.
func (OSFiles) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }

// RemoveAll implements Files.
func (OSFiles) RemoveAll(path string) error { return os.RemoveAll(path) }

// WriteFile implements Files.
func (OSFiles) WriteFile(path string, data []byte, perm fs.FileMode) error {
	return paths.WriteFileAtomic(path, data, perm)
}

// CreateNew implements Files: the content is written to a temporary file
// and hard-linked into place, which fails atomically when path exists.
func (OSFiles) CreateNew(path string, data []byte, perm fs.FileMode) error {
	if _, err := os.Lstat(path); err == nil {
		return &fs.PathError{Op: "create", Path: path, Err: fs.ErrExist}
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return &fs.PathError{Op: "create", Path: path, Err: fs.ErrExist}
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	return paths.SyncDir(dir)
}
