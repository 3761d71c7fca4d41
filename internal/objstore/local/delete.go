// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/paths"
)

// ErrBucketNotEmpty reports a DeleteBucket of a bucket that still holds
// objects (S3's BucketNotEmpty).
var ErrBucketNotEmpty = errors.New("bucket is not empty")

// DeleteBucket deletes an empty bucket: the directory is first renamed to
// a hidden name beside it, which makes the bucket vanish at once (tags
// included), and then removed. A missing bucket is ErrBucketNotFound.
func (b *Bucket) DeleteBucket(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.requireBucket(); err != nil {
		return fmt.Errorf("delete bucket: %w", err)
	}
	page, err := b.List(ctx, "", objstore.ListOptions{MaxKeys: 1})
	if err != nil {
		return fmt.Errorf("delete bucket: %w", err)
	}
	if len(page.Objects) > 0 {
		return fmt.Errorf("delete bucket %q: %w: it still holds %s", b.dir, ErrBucketNotEmpty, page.Objects[0].Key)
	}
	raw := make([]byte, 8)
	if _, err := rand.Read(raw); err != nil {
		return fmt.Errorf("delete bucket: %w", err)
	}
	parent := filepath.Dir(b.dir)
	gone := filepath.Join(parent, "."+filepath.Base(b.dir)+".deleted-"+hex.EncodeToString(raw))
	if err := os.Rename(b.dir, gone); err != nil {
		return fmt.Errorf("delete bucket: %w", err)
	}
	if err := paths.SyncDir(parent); err != nil {
		return fmt.Errorf("delete bucket: %w", err)
	}
	if err := os.RemoveAll(gone); err != nil {
		return fmt.Errorf("delete bucket: the bucket is gone but %s remains: remove it by hand: %w", gone, err)
	}
	return nil
}
