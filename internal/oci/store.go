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
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/paths"
)

// ErrNotFound reports a repository, tag or blob missing from the local store.
var ErrNotFound = errors.New("not in the local image store")

// Store is the local image store: <root>/<registry>/<repository> holds one
// OCI image layout per repository, e.g.
// <root>/registry.podmin.internal/apps/hello. index.json is replaced
// atomically; blobs are written once under their digest.
type Store struct {
	root string
}

// NewStore returns the store rooted at root (Podmin's cache directory plus
// "images"). It creates nothing until something is written.
func NewStore(root string) *Store { return &Store{root: root} }

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
