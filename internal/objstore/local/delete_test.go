// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package local

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"podmin.dev/podmin/internal/objstore"
)

func TestDeleteBucket(t *testing.T) {
	ctx := t.Context()
	parent := t.TempDir()
	b := Open(filepath.Join(parent, "b"))
	if err := b.DeleteBucket(ctx); !errors.Is(err, objstore.ErrBucketNotFound) {
		t.Fatalf("missing bucket: %v", err)
	}
	if err := b.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.SetBucketTags(ctx, map[string]string{"podmin:cluster": "demo"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, "a/b", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteBucket(ctx); !errors.Is(err, ErrBucketNotEmpty) {
		t.Fatalf("non-empty bucket: %v", err)
	}
	if err := b.Delete(ctx, "a/b", ""); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteBucket(ctx); err != nil {
		t.Fatal(err)
	}
	if exists, err := b.BucketExists(ctx); exists || err != nil {
		t.Fatalf("bucket exists=%v after delete (%v)", exists, err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatalf("left behind %v", entries)
	}
}
