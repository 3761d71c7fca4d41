// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package overlay

import (
	"context"
	"errors"
	"fmt"

	"podmin.dev/podmin/internal/objstore"
)

// ErrBucketNotEmpty reports a DeleteBucket while the overlay still lists
// objects.
var ErrBucketNotEmpty = errors.New("bucket is not empty")

// DeleteBucket records the deletion of an empty bucket; afterwards the
// overlay reports the bucket as absent.
func (b *Bucket) DeleteBucket(ctx context.Context) error {
	exists, err := b.BucketExists(ctx)
	if err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("delete bucket: %w", objstore.ErrNotFound)
	}
	page, err := b.List(ctx, "", objstore.ListOptions{MaxKeys: 1})
	if err != nil {
		return fmt.Errorf("delete bucket: %w", err)
	}
	if len(page.Objects) > 0 {
		return fmt.Errorf("delete bucket: %w: it still holds %s", ErrBucketNotEmpty, page.Objects[0].Key)
	}
	b.amu.Lock()
	defer b.amu.Unlock()
	b.deleted, b.created, b.tags = true, false, map[string]string{}
	b.admin = append(b.admin, AdminRecord{Seq: b.seq.Next(), Op: OpDeleteBucket})
	return nil
}
