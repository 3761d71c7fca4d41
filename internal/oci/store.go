// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/progress"
)

// ErrNotFound reports a repository, tag or blob missing from the local store.
var ErrNotFound = errors.New("not in the local image store")

// Store is the local image store: <root>/<registry>/<repository> holds one
// OCI image layout per repository, e.g.
// <root>/registry.podmin.internal/apps/hello. index.json is replaced
// atomically; blobs are written once under their digest.
type Store struct {
	root string
	// sink shows the layers Write stores under title.
	sink  progress.Sink
	title string
}

// NewStore returns the store rooted at root (Podmin's cache directory plus
// "images"). It creates nothing until something is written.
func NewStore(root string) *Store { return &Store{root: root} }

// WithProgress returns the same store whose writes (pull, build) show
// their layers in sink under title.
func (s *Store) WithProgress(sink progress.Sink, title string) *Store {
	c := *s
	c.sink, c.title = sink, title
	return &c
}

// BeginTransfer starts a transfer in the store's progress sink (see
// WithProgress) under its title; build reports the layers it streams into
// the store there.
func (s *Store) BeginTransfer(total int64) progress.Transfer {
	return progress.Or(s.sink).Begin(s.title, total)
}

// WithoutProgress returns the same store without a progress sink.
func (s *Store) WithoutProgress() *Store {
	c := *s
	c.sink, c.title = nil, ""
	return &c
}

// Dir returns the layout directory of repo ("registry/repository"), after
// checking the name with the reference rules, so no name escapes the root.
func (s *Store) Dir(repo string) (string, error) {
	r, err := manifest.ParseImageRef(repo)
	if err != nil || r.Domain == "" || r.Tag != "" || r.Digest != "" {
		return "", fmt.Errorf("local repository %q must be registry/repository without a tag or digest", repo)
	}
	return filepath.Join(s.root, filepath.FromSlash(repo)), nil
}

// Index reads repo's index.json; a missing repository is ErrNotFound.
func (s *Store) Index(repo string) (*v1.IndexManifest, error) {
	dir, err := s.Dir(repo)
	if err != nil {
		return nil, err
	}
	data, err := readLocalIndex(filepath.Join(dir, "index.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("repository %s: %w", repo, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("local index of %s: %w", repo, err)
	}
	m, err := ParseIndex(data)
	if err != nil {
		return nil, fmt.Errorf("local repository %s: %w", repo, err)
	}
	return m, nil
}

// readLocalIndex reads an index.json of at most MaxIndexSize bytes,
// refusing a larger one without reading it.
func readLocalIndex(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if fi.Size() > MaxIndexSize {
		return nil, fmt.Errorf("index.json is %d bytes, more than the %d byte limit: remove unused tags from the repository", fi.Size(), MaxIndexSize)
	}
	data, err := readLimited(f, MaxIndexSize, "index.json")
	if err != nil {
		return nil, fmt.Errorf("%w: remove unused tags from the repository", err)
	}
	return data, nil
}

// Lookup returns the descriptor tagged tag in repo, or ErrNotFound.
func (s *Store) Lookup(repo, tag string) (v1.Descriptor, error) {
	m, err := s.Index(repo)
	if err != nil {
		return v1.Descriptor{}, err
	}
	d, ok := FindTag(m, tag)
	if !ok {
		return v1.Descriptor{}, fmt.Errorf("%s:%s: %w", repo, tag, ErrNotFound)
	}
	return d, nil
}

// ImageIndex returns the index tagged tag in repo, backed by the layout.
func (s *Store) ImageIndex(repo, tag string) (v1.ImageIndex, error) {
	d, err := s.Lookup(repo, tag)
	if err != nil {
		return nil, err
	}
	if !d.MediaType.IsIndex() {
		return nil, fmt.Errorf("%s:%s is a %s, not an image index: pull or build it again", repo, tag, d.MediaType)
	}
	dir, _ := s.Dir(repo)
	root, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("open local layout %s: %w", dir, err)
	}
	top, err := root.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("open local layout %s: %w", dir, err)
	}
	return top.ImageIndex(d.Digest)
}

// Source returns repo's blobs as a Source for Walk and Push.
func (s *Store) Source(repo string) (Source, error) {
	dir, err := s.Dir(repo)
	if err != nil {
		return nil, err
	}
	return dirSource(dir), nil
}

type dirSource string

// Blob reads one blob of the layout.
func (d dirSource) Blob(ctx context.Context, h v1.Hash) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := blobFile(string(d), h)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("blob %s: %w: pull or build the image again", h, ErrNotFound)
	}
	return data, err
}

// OpenBlob opens one blob of the layout for streaming.
func (d dirSource) OpenBlob(ctx context.Context, h v1.Hash) (io.ReadCloser, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	p, err := blobFile(string(d), h)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("blob %s: %w: pull or build the image again", h, ErrNotFound)
	}
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// blobFile is <dir>/blobs/sha256/<hex>.
func blobFile(dir string, h v1.Hash) (string, error) {
	if h.Algorithm != "sha256" || len(h.Hex) != 64 || strings.Trim(h.Hex, "0123456789abcdef") != "" {
		return "", fmt.Errorf("digest %s: only sha256 digests are supported", h)
	}
	return filepath.Join(dir, "blobs", "sha256", h.Hex), nil
}

// Tag points tags of repo at d, replacing their previous descriptors, and
// writes oci-layout and index.json (atomically). The blobs must be there.
// Two processes tagging one repository at the same moment can lose one
// tag (last rename wins); the cluster bucket, not this cache, is where
// concurrent writers are made safe.
func (s *Store) Tag(repo string, d v1.Descriptor, tags ...string) error {
	dir, err := s.Dir(repo)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create local layout %s: %w", dir, err)
	}
	if err := paths.WriteFileAtomic(filepath.Join(dir, "oci-layout"), []byte(LayoutFileContent), 0o644); err != nil {
		return err
	}
	m, err := s.Index(repo)
	if errors.Is(err, ErrNotFound) {
		m, err = EmptyIndex(), nil
	}
	if err != nil {
		return err
	}
	for _, tag := range tags {
		m = MergeTag(m, tag, d, nil)
	}
	data, err := EncodeIndex(m)
	if err != nil {
		return err
	}
	return paths.WriteFileAtomic(filepath.Join(dir, "index.json"), data, 0o644)
}

// BlobWriter streams one new blob into a repository of the store: bytes
// go to a temporary file in the layout's blob directory while they are
// hashed, and Commit renames the file to the digest they hashed to.
type BlobWriter struct {
	f    *os.File
	dir  string
	h    hash.Hash
	n    int64
	done bool
}

// NewBlob starts a blob in repo, whose layout directory is created when
// missing. Call Commit or Abort.
func (s *Store) NewBlob(repo string) (*BlobWriter, error) {
	dir, err := s.Dir(repo)
	if err != nil {
		return nil, err
	}
	blobs := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return nil, fmt.Errorf("create blob directory: %w", err)
	}
	f, err := os.CreateTemp(blobs, ".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create blob: %w", err)
	}
	return &BlobWriter{f: f, dir: dir, h: sha256.New()}, nil
}

// Write adds p to the blob.
func (w *BlobWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.h.Write(p[:n])
	w.n += int64(n)
	return n, err
}

// Size is the number of bytes written so far.
func (w *BlobWriter) Size() int64 { return w.n }

// Commit makes the blob visible under its digest (keeping an existing
// blob of that digest) and returns its descriptor without a media type.
func (w *BlobWriter) Commit() (v1.Descriptor, error) {
	if w.done {
		return v1.Descriptor{}, errors.New("blob already committed or aborted")
	}
	w.done = true
	defer os.Remove(w.f.Name())
	err := w.f.Sync()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("write blob: %w", err)
	}
	d := v1.Descriptor{Size: w.n, Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(w.h.Sum(nil))}}
	p, _ := blobFile(w.dir, d.Digest)
	if exists(p) {
		return d, nil
	}
	if err := os.Rename(w.f.Name(), p); err != nil {
		return v1.Descriptor{}, fmt.Errorf("write blob %s: %w", d.Digest, err)
	}
	return d, nil
}

// Abort discards the blob; after Commit it does nothing.
func (w *BlobWriter) Abort() {
	if !w.done {
		w.done = true
		w.f.Close()
		os.Remove(w.f.Name())
	}
}

// writeBlob stores r under h unless the blob exists, verifying the digest
// before the file becomes visible.
func writeBlob(dir string, h v1.Hash, r io.Reader) error {
	p, err := blobFile(dir, h)
	if err != nil {
		return err
	}
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("create blob directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return fmt.Errorf("write blob %s: %w", h, err)
	}
	defer os.Remove(tmp.Name())
	sum := sha256.New()
	_, err = io.Copy(io.MultiWriter(tmp, sum), r)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write blob %s: %w", h, err)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != h.Hex {
		return fmt.Errorf("blob %s arrived with digest sha256:%s: retry the transfer", h, got)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("write blob %s: %w", h, err)
	}
	return nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
