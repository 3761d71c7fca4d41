// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package remote_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"podmin.dev/podmin/internal/oci"
	ociremote "podmin.dev/podmin/internal/oci/remote"
)

// testIndex is a two-platform OCI index of random images.
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

func TestPullImportsEveryPlatform(t *testing.T) {
	ctx := t.Context()
	srv := httptest.NewServer(registry.New())
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	idx := testIndex(t)
	ref, err := name.ParseReference(host + "/example/web:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	lr, err := oci.RemoteRef(host + "/example/web:v1")
	if err != nil {
		t.Fatal(err)
	}
	store := oci.NewStore(t.TempDir())
	d, err := ociremote.Pull(ctx, store, lr.Remote, lr.Repo, lr.Tag)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	if d.Digest != want {
		t.Fatalf("pulled %s, want the remote index %s", d.Digest, want)
	}
	src, _ := store.Source(lr.Repo)
	g, err := oci.Walk(ctx, src, d)
	if err != nil {
		t.Fatalf("the local copy is incomplete: %v", err)
	}
	for _, b := range g.Blobs {
		if _, err := src.Blob(ctx, b.Digest); err != nil {
			t.Errorf("blob %s: %v", b.Digest, err)
		}
	}
	if len(g.Nested) != 2 {
		t.Errorf("nested manifests %d, want 2 platforms", len(g.Nested))
	}

	// A single-platform image becomes a one-entry index.
	img, _ := random.Image(100, 1)
	single, _ := name.ParseReference(host + "/example/single:v1")
	if err := remote.Write(single, img); err != nil {
		t.Fatal(err)
	}
	lr, _ = oci.RemoteRef(host + "/example/single:v1")
	d, err = ociremote.Pull(ctx, store, lr.Remote, lr.Repo, lr.Tag)
	if err != nil || !d.MediaType.IsIndex() {
		t.Fatalf("single image pulled as %+v, %v; want an index", d, err)
	}

	lr, _ = oci.RemoteRef(host + "/example/missing:v1")
	if _, err := ociremote.Pull(ctx, store, lr.Remote, lr.Repo, lr.Tag); err == nil || !strings.Contains(err.Error(), "docker login") {
		t.Errorf("pull of a missing image error = %v", err)
	}
	if _, err := store.Lookup(lr.Repo, lr.Tag); !errors.Is(err, oci.ErrNotFound) {
		t.Errorf("failed pull left %v", err)
	}
}
