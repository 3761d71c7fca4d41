// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"podmin.dev/podmin/agent/registry"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/oci"
)

// StoreObjects streams blobs through objstore.OpenObject: a range reads
// only its bytes from the store, a whole blob is verified while it
// streams, and an index.json whose size the store misreports is refused
// one byte past the limit.
func TestStoreObjectsStreams(t *testing.T) {
	ctx := t.Context()
	b := local.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := b.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	blob := make([]byte, 4<<20)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(blob)
	sum := sha256.Sum256(blob)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if _, err := b.Put(ctx, "apps/s/blobs/sha256/"+hex.EncodeToString(sum[:]), blob); err != nil {
		t.Fatal(err)
	}
	store := &objstoretest.CountingStore{Store: b}
	h := registry.New(registry.StoreObjects(store))

	r := do(t, h, "GET", "/v2/apps/s/blobs/"+digest, "Range", "bytes=1000-1099")
	if r.status != 206 || !bytes.Equal(r.body, blob[1000:1100]) {
		t.Fatalf("range GET = %d, %d bytes", r.status, len(r.body))
	}
	if n := store.Read.Swap(0); n != 100 {
		t.Errorf("a 100 byte range read %d bytes from the store", n)
	}
	if r := do(t, h, "GET", "/v2/apps/s/blobs/"+digest); r.status != 200 || !bytes.Equal(r.body, blob) {
		t.Fatalf("GET = %d, %d bytes", r.status, len(r.body))
	}

	big := bytes.Repeat([]byte(" "), 3*oci.MaxIndexSize)
	if _, err := b.Put(ctx, "apps/big/index.json", big); err != nil {
		t.Fatal(err)
	}
	for _, lie := range []bool{false, true} {
		store := &objstoretest.CountingStore{Store: b, LieSize: lie}
		r := do(t, registry.New(registry.StoreObjects(store)), "GET", "/v2/apps/big/manifests/v1")
		if r.status != 500 {
			t.Errorf("oversized index (size misreported: %v): %d", lie, r.status)
		}
		if n := store.Read.Load(); n > oci.MaxIndexSize+1 {
			t.Errorf("read %d bytes of a %d byte index.json (size misreported: %v)", n, len(big), lie)
		}
	}
}
