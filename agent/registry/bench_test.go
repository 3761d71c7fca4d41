// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package registry_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"podmin.dev/podmin/agent/registry"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
)

// fetch GETs url and discards the body, returning its length.
func fetch(b *testing.B, client *http.Client, url string) int64 {
	resp, err := client.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("GET %s = %d, %v", url, resp.StatusCode, err)
	}
	return n
}

// BenchmarkBlobGet compares a registry blob GET (HTTP, streamed from S3
// on versitygw) with a direct object-store Get of the same blob. The
// ratio of their MB/s is the registry's overhead.
func BenchmarkBlobGet(b *testing.B) {
	const size = 32 << 20
	srv := objstoretest.StartVersityGW(b)
	bucket := s3storetest.NewBucket(b, srv)
	blob := make([]byte, size)
	_, _ = rand.Read(blob)
	sum := sha256.Sum256(blob)
	key := "apps/bench/blobs/sha256/" + hex.EncodeToString(sum[:])
	if _, err := bucket.Put(b.Context(), key, blob); err != nil {
		b.Fatal(err)
	}
	ts := s3Registry(b, srv, bucket)
	url := ts.URL + "/v2/apps/bench/blobs/sha256:" + hex.EncodeToString(sum[:])
	b.Run("direct", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			if obj, err := bucket.Get(b.Context(), key, objstore.GetOptions{}); err != nil || len(obj.Data) != size {
				b.Fatal(err)
			}
		}
	})
	b.Run("registry", func(b *testing.B) {
		b.SetBytes(size)
		client := ts.Client()
		for b.Loop() {
			if fetch(b, client, url) != size {
				b.Fatal("short body")
			}
		}
	})
}

// writeBlob writes size random bytes as a blob of apps/big in a new local
// bucket and returns the bucket and the blob's hex digest.
func writeBlob(b *testing.B, size int) (*local.Bucket, string) {
	dir := filepath.Join(b.TempDir(), "bucket")
	bucket := local.Open(dir)
	if err := bucket.CreateBucket(b.Context()); err != nil {
		b.Fatal(err)
	}
	h := sha256.New()
	blobDir := filepath.Join(dir, "apps", "big", "blobs", "sha256")
	if err := os.MkdirAll(blobDir, 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(filepath.Join(blobDir, "tmp"))
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, min(size, 1<<20))
	for range size / len(chunk) {
		_, _ = rand.Read(chunk)
		_, _ = f.Write(chunk)
		h.Write(chunk)
	}
	f.Close()
	digest := hex.EncodeToString(h.Sum(nil))
	if err := os.Rename(f.Name(), filepath.Join(blobDir, digest)); err != nil {
		b.Fatal(err)
	}
	return bucket, digest
}

// BenchmarkServe256MiB serves a 256 MiB blob from a local bucket through
// the registry (first request verified while streaming, later ones served
// as a verified version) and, for comparison, through a plain Go file
// server of the same file. It reports the bytes the process allocated per
// request, which stays far below the blob size because blobs are streamed.
func BenchmarkServe256MiB(b *testing.B) {
	const size = 256 << 20
	bucket, digest := writeBlob(b, size)
	reg := httptest.NewServer(registry.New(registry.LocalObjects(bucket)))
	b.Cleanup(reg.Close)
	// The registry's own cost, apart from the store's HEAD: the same
	// handler over a Head that only stats the file.
	stat := httptest.NewServer(registry.New(statHead{registry.LocalObjects(bucket), bucket.Dir()}))
	b.Cleanup(stat.Close)
	files := httptest.NewServer(http.FileServer(http.Dir(bucket.Dir())))
	b.Cleanup(files.Close)
	for _, tc := range []struct{ name, url string }{
		{"registry", reg.URL + "/v2/apps/big/blobs/sha256:" + digest},
		{"registry-stat-head", stat.URL + "/v2/apps/big/blobs/sha256:" + digest},
		{"fileserver", files.URL + "/apps/big/blobs/sha256/" + digest},
	} {
		b.Run(tc.name, func(b *testing.B) {
			client := &http.Client{}
			b.SetBytes(size)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for b.Loop() {
				if fetch(b, client, tc.url) != size {
					b.Fatal("short body")
				}
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/(1<<20), "alloc-MiB/op")
		})
	}
}

// statHead answers Head from the file's metadata alone, in O(1).
type statHead struct {
	registry.Objects
	dir string
}

func (s statHead) Head(_ context.Context, key string) (objstore.Info, error) {
	fi, err := os.Stat(filepath.Join(s.dir, filepath.FromSlash(key)))
	if err != nil {
		return objstore.Info{}, objstore.ErrNotFound
	}
	return objstore.Info{Key: key, Size: fi.Size(), ETag: fmt.Sprintf("%q", fi.ModTime().String()), LastModified: fi.ModTime()}, nil
}

// BenchmarkRangeTTFB is the time to the first byte of a 100-byte Range
// request, for a small and a 256 MiB blob: it must not grow with the blob.
func BenchmarkRangeTTFB(b *testing.B) {
	for _, tc := range []struct {
		size     int
		statHead bool
	}{{1 << 20, false}, {256 << 20, false}, {1 << 20, true}, {256 << 20, true}} {
		name := fmt.Sprintf("%dMiB", tc.size>>20)
		if tc.statHead {
			name += "-stat-head"
		}
		b.Run(name, func(b *testing.B) {
			bucket, digest := writeBlob(b, tc.size)
			var objects registry.Objects = registry.LocalObjects(bucket)
			if tc.statHead {
				objects = statHead{objects, bucket.Dir()}
			}
			ts := httptest.NewServer(registry.New(objects))
			b.Cleanup(ts.Close)
			url := ts.URL + "/v2/apps/big/blobs/sha256:" + digest
			client := &http.Client{}
			for b.Loop() {
				req, _ := http.NewRequest("GET", url, nil)
				req.Header.Set("Range", "bytes=1000-1099")
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 206 || n != 100 {
					b.Fatalf("range: %d, %d bytes", resp.StatusCode, n)
				}
			}
		})
	}
}
