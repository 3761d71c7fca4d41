// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/paths"
)

// region is what BucketRegion reports for every local bucket.
const region = "local"

// BucketExists reports whether the bucket directory exists. A file in its
// place is an error, not a missing bucket, so that nothing tries to create
// a bucket over it.
func (b *Bucket) BucketExists(ctx context.Context) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	err := b.requireBucket()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, objstore.ErrBucketNotFound):
		return false, nil
	default:
		return false, err
	}
}

// CreateBucket creates the bucket directory (0700, parents included) and its
// .podmin folder. An existing directory without .podmin is adopted: it gets
// its .podmin folder and its files become the bucket's objects, but since
// Podmin did not create the directory the result is ErrBucketExists, so
// that no caller claims it as its own. A directory that already has
// .podmin is ErrBucketExists too.
func (b *Bucket) CreateBucket(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(b.dir), 0o700); err != nil {
		return fmt.Errorf("create local bucket: %w", err)
	}
	existed := false
	switch err := syscall.Mkdir(b.dir, 0o700); {
	case errors.Is(err, syscall.EEXIST):
		if !isDir(b.dir) {
			return fmt.Errorf("create local bucket: %q is a file, not a directory: remove it or choose another bucket directory", b.dir)
		}
		existed = true
	case err != nil:
		return fmt.Errorf("create local bucket: %w", &os.PathError{Op: "mkdir", Path: b.dir, Err: err})
	default:
		if err := paths.SyncDir(filepath.Dir(b.dir)); err != nil {
			return fmt.Errorf("create local bucket: %w", err)
		}
	}
	switch err := syscall.Mkdir(b.metaPath(), 0o700); {
	case errors.Is(err, syscall.EEXIST):
		if !isDir(b.metaPath()) {
			return fmt.Errorf("create local bucket: %s is a file: remove it and create the bucket again", b.metaPath())
		}
		return fmt.Errorf("create local bucket %q: %w", b.dir, objstore.ErrBucketExists)
	case err != nil:
		return fmt.Errorf("create local bucket: %w", &os.PathError{Op: "mkdir", Path: b.metaPath(), Err: err})
	}
	if err := b.ensureMeta(); err != nil {
		return err
	}
	if err := paths.SyncDir(b.metaPath()); err != nil {
		return err
	}
	if err := paths.SyncDir(b.dir); err != nil {
		return err
	}
	if existed {
		return fmt.Errorf("create local bucket: adopted the existing directory %q, which Podmin did not create: %w", b.dir, objstore.ErrBucketExists)
	}
	return nil
}

// BucketTags returns the tags stored in .podmin/tags.json; none when the
// file is absent.
func (b *Bucket) BucketTags(ctx context.Context) (map[string]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := b.requireBucket(); err != nil {
		return nil, fmt.Errorf("bucket tags: %w", err)
	}
	name := b.metaPath("tags.json")
	data, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bucket tags: %w", err)
	}
	tags := map[string]string{}
	if err := json.Unmarshal(data, &tags); err != nil {
		return nil, fmt.Errorf("bucket tags: %s is corrupt: fix or delete it: %w", name, err)
	}
	return tags, nil
}

// SetBucketTags replaces the bucket's tags by atomically rewriting
// .podmin/tags.json (mode 0600).
func (b *Bucket) SetBucketTags(ctx context.Context, tags map[string]string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if tags == nil {
		tags = map[string]string{}
	}
	data, err := json.MarshalIndent(tags, "", "  ")
	if err != nil {
		return fmt.Errorf("set bucket tags: %w", err)
	}
	if err := b.ensureMeta(); err != nil {
		return fmt.Errorf("set bucket tags: %w", err)
	}
	tmp, err := b.writeTemp(append(data, '\n'))
	if err != nil {
		return fmt.Errorf("set bucket tags: %w", err)
	}
	if err := os.Rename(tmp, b.metaPath("tags.json")); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("set bucket tags: %w", err)
	}
	if err := paths.SyncDir(b.metaPath()); err != nil {
		return fmt.Errorf("set bucket tags: %w", err)
	}
	return nil
}

// BucketRegion reports "local".
func (b *Bucket) BucketRegion(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := b.requireBucket(); err != nil {
		return "", fmt.Errorf("bucket region: %w", err)
	}
	return region, nil
}
