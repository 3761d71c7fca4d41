// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package oci_test

import (
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"podmin.dev/podmin/internal/objstore/local"
)

// testIndex returns a fresh random two-platform OCI index.
func testIndex(t testing.TB) v1.ImageIndex {
	t.Helper()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range []string{"amd64", "arm64"} {
		img, err := random.Image(512, 2)
		if err != nil {
			t.Fatal(err)
		}
		img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch},
		}})
	}
	return idx
}

// newBucket returns an empty local bucket.
func newBucket(t testing.TB) *local.Bucket {
	t.Helper()
	b := local.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := b.CreateBucket(t.Context()); err != nil {
		t.Fatal(err)
	}
	return b
}
