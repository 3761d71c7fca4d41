// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package build_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"podmin.dev/podmin/internal/oci"
	"podmin.dev/podmin/internal/oci/build"
)

// TestBuildStreamsLayersIntoTheStore builds a layer holding 24 MiB of
// random bytes with a Store: the layer lands in the store as a blob named
// by its digest while allocating far less than its size, its diff ID is
// the digest of its tar, and writing the image afterwards finds it there.
func TestBuildStreamsLayersIntoTheStore(t *testing.T) {
	const size = 24 << 20
	dir := writeContext(t, map[string]string{"Containerfile": "FROM scratch\nCOPY big /big\n"})
	f, err := os.Create(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, io.LimitReader(rand.NewChaCha8([32]byte{1}), size)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	const repo = "registry.podmin.internal/apps/big"
	store := oci.NewStore(t.TempDir())

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	idx, err := build.Build(context.Background(), build.Options{
		ContextDir: dir, Platforms: []v1.Platform{amd64}, Store: store, Repository: repo,
	})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/3 {
		t.Errorf("the build allocated %d MiB for a %d MiB layer, want it streamed", alloc>>20, size>>20)
	}
	img, _ := image(t, idx, 0)
	layers, _ := img.Layers()
	l := layers[len(layers)-1]
	digest, _ := l.Digest()
	diffID, _ := l.DiffID()
	layout, _ := store.Dir(repo)
	blob := filepath.Join(layout, "blobs", "sha256", digest.Hex)
	if got := fileDigest(t, blob); got != digest.Hex {
		t.Errorf("layer blob hashes to %s, want its digest %s", got, digest.Hex)
	}
	rc, _ := l.Uncompressed()
	h := sha256.New()
	if _, err := io.Copy(h, rc); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if got := hex.EncodeToString(h.Sum(nil)); got != diffID.Hex {
		t.Errorf("the layer's tar hashes to %s, want its diff ID %s", got, diffID.Hex)
	}
	entries, _ := os.ReadDir(filepath.Dir(blob))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	fi, _ := os.Stat(blob)
	if _, err := store.Write(context.Background(), repo, idx, "v1"); err != nil {
		t.Fatal(err)
	}
	if fi2, _ := os.Stat(blob); !os.SameFile(fi, fi2) {
		t.Error("writing the image rewrote the layer the build had stored")
	}
	// The same build without a Store gives the same image.
	mem, err := build.Build(context.Background(), build.Options{ContextDir: dir, Platforms: []v1.Platform{amd64}})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := mustIndexDigest(t, idx), mustIndexDigest(t, mem); a != b {
		t.Errorf("streamed build %s differs from the in-memory build %s", a, b)
	}
}

func fileDigest(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func mustIndexDigest(t *testing.T, idx v1.ImageIndex) v1.Hash {
	t.Helper()
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
