// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package oci_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"podmin.dev/podmin/internal/oci"
)

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
	d, err := store.Pull(ctx, lr.Remote, lr.Repo, lr.Tag)
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
	d, err = store.Pull(ctx, lr.Remote, lr.Repo, lr.Tag)
	if err != nil || !d.MediaType.IsIndex() {
		t.Fatalf("single image pulled as %+v, %v; want an index", d, err)
	}

	lr, _ = oci.RemoteRef(host + "/example/missing:v1")
	if _, err := store.Pull(ctx, lr.Remote, lr.Repo, lr.Tag); err == nil || !strings.Contains(err.Error(), "docker login") {
		t.Errorf("pull of a missing image error = %v", err)
	}
	if _, err := store.Lookup(lr.Repo, lr.Tag); !errors.Is(err, oci.ErrNotFound) {
		t.Errorf("failed pull left %v", err)
	}
}

func TestDestination(t *testing.T) {
	for _, tc := range []struct{ src, dst, want, err string }{
		{"hello:v1", "", "registry.podmin.internal/apps/hello:v1", ""},
		{"hello", "", "registry.podmin.internal/apps/hello:latest", ""},
		{"ghcr.io/example/web:v2", "", "registry.podmin.internal/apps/example/web:v2", ""},
		{"registry.podmin.internal/apps/x/y:1", "", "registry.podmin.internal/apps/x/y:1", ""},
		{"nginx:1.27", "web:v1", "registry.podmin.internal/apps/web:v1", ""},
		{"nginx:1.27", "registry.podmin.internal/apps/web", "registry.podmin.internal/apps/web:latest", ""},
		{"nginx:1.27", "mirror/pause:3.10", "", "mirror/ is reserved"},
		{"nginx:1.27", "registry.podmin.internal/mirror/x/pause:3.10", "", "mirror/ is reserved"},
		{"registry.podmin.internal/mirror/registry.k8s.io/pause:3.10", "", "", "mirror/ is reserved"},
		{"nginx:1.27", "ghcr.io/x/y:v1", "", "not in the cluster registry"},
		{"nginx:1.27", "web@sha256:" + strings.Repeat("a", 64), "", "has a digest"},
		{"nginx:1.27", "Bad:v1", "", "not a valid image reference"},
	} {
		got, err := oci.Destination(tc.src, tc.dst)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Destination(%q, %q) error = %v, want %q", tc.src, tc.dst, err, tc.err)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("Destination(%q, %q) = %s, %v; want %s", tc.src, tc.dst, got, err, tc.want)
		}
	}
}
