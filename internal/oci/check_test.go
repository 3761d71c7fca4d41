// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package oci_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/oci"
	"podmin.dev/podmin/internal/state"
)

// A published image is checked from the bucket alone: its manifests read
// and verified, every other blob Headed. Each kind of damage is reported,
// also on a store that knows no content digests, where a same-size
// manifest is caught by its digest.
func TestCheckPublished(t *testing.T) {
	ctx := t.Context()
	src, top := stored(t, oci.NewStore(t.TempDir()), "v1")
	dst, _ := state.AppLayout("hello")
	published := func(t *testing.T) (*faultstore.Store, v1.Manifest, v1.Hash) {
		t.Helper()
		bucket := faultstore.New(objstoretest.WithoutContentDigests(newBucket(t)))
		if _, err := oci.Push(ctx, bucket, src, top, dst, "v1", oci.PushOptions{}); err != nil {
			t.Fatal(err)
		}
		var image v1.IndexManifest
		mustDecode(t, blob(t, bucket, dst, top.Digest), &image)
		var m v1.Manifest
		mustDecode(t, blob(t, bucket, dst, image.Manifests[1].Digest), &m)
		bucket.ResetCounts()
		return bucket, m, image.Manifests[1].Digest
	}

	t.Run("intact", func(t *testing.T) {
		bucket, _, _ := published(t)
		problems, err := oci.CheckPublished(ctx, bucket, dst, top)
		if err != nil || len(problems) != 0 {
			t.Fatalf("problems %q, %v", problems, err)
		}
		// 1 index + 2 manifests read, 2 configs + 4 layers Headed.
		if c := bucket.Counts(); c.Get != 3 || c.Head != 6 || c.Total() != 9 {
			t.Fatalf("requests %+v, want 3 Gets and 6 Heads", c)
		}
	})

	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, bucket objstore.Store, layer v1.Descriptor, manifest v1.Hash)
		want   string
	}{
		{"layer removed", func(t *testing.T, b objstore.Store, l v1.Descriptor, _ v1.Hash) {
			mustDelete(t, b, blobKey(t, dst, l.Digest))
		}, "is missing"},
		{"layer truncated", func(t *testing.T, b objstore.Store, l v1.Descriptor, _ v1.Hash) {
			data := blob(t, b, dst, l.Digest)
			mustPut(t, b, blobKey(t, dst, l.Digest), data[:len(data)-1])
		}, "not its content"},
		{"manifest removed", func(t *testing.T, b objstore.Store, _ v1.Descriptor, m v1.Hash) {
			mustDelete(t, b, blobKey(t, dst, m))
		}, "is missing"},
		{"manifest of the same size, other content", func(t *testing.T, b objstore.Store, _ v1.Descriptor, m v1.Hash) {
			data := bytes.Clone(blob(t, b, dst, m))
			data[len(data)/2] ^= 0x01
			mustPut(t, b, blobKey(t, dst, m), data)
		}, "does not match its digest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bucket, m, manifest := published(t)
			tc.damage(t, bucket, m.Layers[0], manifest)
			problems, err := oci.CheckPublished(ctx, bucket, dst, top)
			if err != nil || len(problems) != 1 || !strings.Contains(problems[0], tc.want) {
				t.Fatalf("problems %q, %v; want one that says %q", problems, err, tc.want)
			}
		})
	}

	// A failed request concludes nothing: it is an error, not a problem.
	for _, op := range []faultstore.Op{faultstore.OpGet, faultstore.OpHead} {
		t.Run("failed "+string(op), func(t *testing.T) {
			bucket, _, _ := published(t)
			bucket.SetRules(faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{op}, Skip: 1, Limit: 1})
			problems, err := oci.CheckPublished(ctx, bucket, dst, top)
			if err == nil || len(problems) != 0 {
				t.Fatalf("problems %q, error %v; want an error and no problems", problems, err)
			}
		})
	}
}

func blobKey(t *testing.T, l state.OCILayout, d v1.Hash) string {
	t.Helper()
	key, err := l.BlobPath(d.String())
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func blob(t *testing.T, s objstore.Store, l state.OCILayout, d v1.Hash) []byte {
	t.Helper()
	obj, err := s.Get(t.Context(), blobKey(t, l, d), objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj.Data
}

func mustDelete(t *testing.T, s objstore.Store, key string) {
	t.Helper()
	if err := s.Delete(t.Context(), key, ""); err != nil {
		t.Fatal(err)
	}
}

func mustPut(t *testing.T, s objstore.Store, key string, data []byte) {
	t.Helper()
	if _, err := s.Put(t.Context(), key, data); err != nil {
		t.Fatal(err)
	}
}

func mustDecode(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}
