// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package overlay_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/overlay"
)

func newLocal(t *testing.T) *local.Bucket {
	t.Helper()
	b := local.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := b.CreateBucket(t.Context()); err != nil {
		t.Fatal(err)
	}
	return b
}

// listing is every key and ETag of a store.
func listing(t *testing.T, s objstore.Store) map[string]string {
	t.Helper()
	all, err := objstore.ListAll(t.Context(), s, "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range all {
		out[o.Key] = o.ETag
	}
	return out
}

func TestFallThroughAndCopyOnWrite(t *testing.T) {
	ctx := t.Context()
	real := newLocal(t)
	for _, k := range []string{"a/1", "a/2", "a/3", "b/1"} {
		if _, err := real.Put(ctx, k, []byte("real "+k)); err != nil {
			t.Fatal(err)
		}
	}
	before := listing(t, real)
	o := overlay.New(real, overlay.Options{})

	obj, err := o.Get(ctx, "a/2", objstore.GetOptions{})
	if err != nil || string(obj.Data) != "real a/2" {
		t.Fatalf("fall-through Get = %q, %v", obj.Data, err)
	}
	// Conditional writes against real ETags work in the overlay.
	if _, err := o.PutIfMatch(ctx, "a/2", []byte("new"), "\"stale\""); !errors.Is(err, objstore.ErrPrecondition) {
		t.Fatalf("stale PutIfMatch = %v", err)
	}
	etag, err := o.PutIfMatch(ctx, "a/2", []byte("new"), obj.ETag)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.PutIfAbsent(ctx, "a/1", []byte("x")); !errors.Is(err, objstore.ErrPrecondition) {
		t.Fatalf("PutIfAbsent over a real object = %v", err)
	}
	if err := o.Delete(ctx, "a/1", "\"stale\""); !errors.Is(err, objstore.ErrPrecondition) {
		t.Fatalf("stale conditional delete = %v", err)
	}
	if err := o.Delete(ctx, "a/1", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := o.PutIfAbsent(ctx, "a/0", []byte("zero")); err != nil {
		t.Fatal(err)
	}
	if err := o.Delete(ctx, "never", ""); err != nil {
		t.Fatal(err)
	}
	// Later reads see the overlay.
	if _, err := o.Get(ctx, "a/1", objstore.GetOptions{}); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get of an overlay-deleted key = %v", err)
	}
	if got, err := o.Get(ctx, "a/2", objstore.GetOptions{}); err != nil || string(got.Data) != "new" || got.ETag != etag {
		t.Fatalf("Get after overlay write = %q %s %v", got.Data, got.ETag, err)
	}
	if _, err := o.Get(ctx, "a/2", objstore.GetOptions{IfNoneMatch: etag}); !errors.Is(err, objstore.ErrNotModified) {
		t.Fatalf("Get If-None-Match = %v", err)
	}
	for _, max := range []int{1, 2, 10} {
		var keys []string
		opts := objstore.ListOptions{MaxKeys: max}
		for {
			p, err := o.List(ctx, "a/", opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range p.Objects {
				keys = append(keys, x.Key)
			}
			if !p.Truncated {
				break
			}
			opts.StartAfter = p.NextStartAfter
		}
		if want := []string{"a/0", "a/2", "a/3"}; !slices.Equal(keys, want) {
			t.Fatalf("List by %d = %q, want %q", max, keys, want)
		}
	}
	// Nothing real changed.
	after := listing(t, real)
	if len(after) != len(before) {
		t.Fatalf("real store changed: %v -> %v", before, after)
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("real object %s changed", k)
		}
	}
	var got []string
	for _, r := range o.Records() {
		got = append(got, string(r.Op)+" "+r.Key)
	}
	if want := []string{"put a/2", "delete a/1", "put a/0"}; !slices.Equal(got, want) {
		t.Fatalf("records %q, want %q", got, want)
	}
	r := o.Records()[0]
	if !r.Before.Exists || string(r.Before.Data) != "real a/2" || string(r.After.Data) != "new" {
		t.Fatalf("record before/after = %+v", r)
	}
}

func TestBucketCreatedInOverlay(t *testing.T) {
	ctx := t.Context()
	real := local.Open(filepath.Join(t.TempDir(), "absent"))
	b := overlay.NewBucket(real, overlay.Options{Region: "local"})
	if ok, err := b.BucketExists(ctx); err != nil || ok {
		t.Fatalf("BucketExists = %v, %v", ok, err)
	}
	if err := b.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.SetBucketTags(ctx, map[string]string{"podmin:cluster": "c"}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := real.BucketExists(ctx); ok {
		t.Fatal("the real bucket was created")
	}
	if tags, _ := b.BucketTags(ctx); tags["podmin:cluster"] != "c" {
		t.Fatalf("tags %v", tags)
	}
	if r, _ := b.BucketRegion(ctx); r != "local" {
		t.Fatalf("region %q", r)
	}
	if _, err := b.PutIfAbsent(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if l := listing(t, b); len(l) != 1 {
		t.Fatalf("listing %v", l)
	}
	if got := b.AdminRecords(); len(got) != 2 || got[0].Op != overlay.OpCreateBucket || got[1].Op != overlay.OpSetTags {
		t.Fatalf("admin records %+v", got)
	}
	if err := b.CreateBucket(ctx); !errors.Is(err, objstore.ErrBucketExists) {
		t.Fatalf("second CreateBucket = %v", err)
	}
}

// TestConformance runs the object-store contract over an overlay of an
// empty real bucket, and over an overlay whose real bucket holds objects
// the overlay has deleted (tombstones must not show through).
func TestConformance(t *testing.T) {
	t.Run("overlay", func(t *testing.T) {
		objstoretest.Run(t, func(t *testing.T) objstore.Store {
			return overlay.New(newLocal(t), overlay.Options{})
		})
	})
	t.Run("overlay-tombstones", func(t *testing.T) {
		objstoretest.Run(t, func(t *testing.T) objstore.Store {
			real := newLocal(t)
			o := overlay.New(real, overlay.Options{})
			// Real objects interleaved with the suite's keys, all deleted
			// in the overlay: the overlay must look empty.
			for _, k := range []string{"!", "a/00", "a/05x", "b/x/a", "dir/x", "k0", "m", "zz"} {
				if _, err := real.Put(t.Context(), k, []byte("hidden")); err != nil {
					t.Fatal(err)
				}
				if err := o.Delete(t.Context(), k, ""); err != nil {
					t.Fatal(err)
				}
			}
			return o
		})
	})
}

// With KeepAtMost an overlay stages a large streamed write without holding
// it: the key exists with its exact size and content ETag (conditions see
// it), reading it fails with ErrNotKept, small bodies are kept as usual,
// and the real store is never written.
func TestKeepAtMostDropsLargeBodies(t *testing.T) {
	ctx := t.Context()
	real := newLocal(t)
	o := overlay.New(real, overlay.Options{KeepAtMost: 1024})
	big := bytes.Repeat([]byte("podmin"), 1000)
	etag, err := o.Write(ctx, "deps/big", bytes.NewReader(big), int64(len(big)), objstore.PutOptions{IfAbsent: true})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(big)
	if want := `"` + hex.EncodeToString(sum[:]) + `"`; etag != want {
		t.Fatalf("ETag %s, want the content's %s", etag, want)
	}
	info, err := o.Head(ctx, "deps/big")
	if err != nil || info.Size != int64(len(big)) || info.ETag != etag {
		t.Fatalf("Head = %+v, %v", info, err)
	}
	if _, err := o.Get(ctx, "deps/big", objstore.GetOptions{}); !errors.Is(err, overlay.ErrNotKept) {
		t.Fatalf("Get of a dropped body = %v, want ErrNotKept", err)
	}
	if _, err := objstore.OpenObject(ctx, o, "deps/big", objstore.GetOptions{}); !errors.Is(err, overlay.ErrNotKept) {
		t.Fatalf("Open of a dropped body = %v, want ErrNotKept", err)
	}
	if _, err := o.Write(ctx, "deps/big", bytes.NewReader(big), int64(len(big)), objstore.PutOptions{IfAbsent: true}); !errors.Is(err, objstore.ErrPrecondition) {
		t.Fatalf("second create-only write = %v, want ErrPrecondition", err)
	}
	if _, err := o.Write(ctx, "deps/short", bytes.NewReader(big[:2000]), int64(len(big)), objstore.PutOptions{}); !errors.Is(err, objstore.ErrSizeMismatch) {
		t.Fatalf("short body = %v, want ErrSizeMismatch", err)
	}
	if _, err := o.Write(ctx, "deps/small", bytes.NewReader(big[:100]), 100, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if obj, err := o.Get(ctx, "deps/small", objstore.GetOptions{}); err != nil || !bytes.Equal(obj.Data, big[:100]) {
		t.Fatalf("small body = %q, %v", obj.Data, err)
	}
	if got := listing(t, o); got["deps/big"] != etag || len(got) != 2 {
		t.Fatalf("listing %v", got)
	}
	if got := listing(t, real); len(got) != 0 {
		t.Fatalf("the real store was written: %v", got)
	}
}
