// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"podmin.dev/podmin/agent/registry"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/oci"
)

// bigManifest is an image index of about size bytes (padded with an
// annotation) and its digest.
func bigManifest(size int) ([]byte, string) {
	pad := strings.Repeat("p", size-200)
	m := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[],"annotations":{"pad":"` + pad + `"}}`)
	return m, digestOf(m)
}

// tagManifest lists manifest (of digest d) as repo's tag v1.
func tagManifest(manifest []byte, d string) []byte {
	h, _ := v1.NewHash(d)
	ix := oci.MergeTag(oci.EmptyIndex(), "v1", v1.Descriptor{MediaType: types.OCIImageIndex, Size: int64(len(manifest)), Digest: h}, nil)
	data, _ := oci.EncodeIndex(ix)
	return data
}

// gatedObjects holds every manifest read open until the test releases
// it, counting how many are open at once.
type gatedObjects struct {
	*fakeObjects
	key           string
	open, maxOpen atomic.Int64
	release       chan struct{}
}

func (g *gatedObjects) Open(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if key == g.key {
		n := g.open.Add(1)
		for {
			m := g.maxOpen.Load()
			if n <= m || g.maxOpen.CompareAndSwap(m, n) {
				break
			}
		}
		<-g.release
		defer g.open.Add(-1)
	}
	return g.fakeObjects.Open(ctx, key, offset, length)
}

// Concurrent manifest requests hold at most the configured manifest
// memory: with room for two manifests, eight concurrent GETs and HEADs
// read at most two at a time, and every one is answered in full.
func TestManifestMemoryIsBounded(t *testing.T) {
	manifest, d := bigManifest(1 << 20)
	key := "apps/hello/blobs/sha256/" + d[7:]
	g := &gatedObjects{fakeObjects: newFakeObjects(), key: key, release: make(chan struct{})}
	g.put(key, manifest)
	g.put("apps/hello/index.json", tagManifest(manifest, d))
	srv := httptest.NewServer(registry.New(g, registry.WithManifestMemory(2*int64(len(manifest)+1))))
	defer srv.Close()
	const requests = 8
	var wg sync.WaitGroup
	results := make(chan string, requests)
	for i := range requests {
		method := []string{"GET", "HEAD"}[i%2]
		wg.Go(func() {
			status, body, complete := get(t, method, srv.URL+"/v2/apps/hello/manifests/v1")
			if status != 200 || (method == "GET" && (!complete || !bytes.Equal(body, manifest))) {
				results <- fmt.Sprintf("%s: %d, %d bytes, complete %v", method, status, len(body), complete)
				return
			}
			results <- ""
		})
	}
	// Let the reads through one at a time, each once two are open (or
	// all that are left).
	for done := 0; done < requests; done++ {
		deadline := time.Now().Add(20 * time.Second)
		for g.open.Load() < int64(min(2, requests-done)) {
			if time.Now().After(deadline) {
				t.Fatalf("after %d reads, %d are open", done, g.open.Load())
			}
			runtime.Gosched()
		}
		g.release <- struct{}{}
	}
	wg.Wait()
	close(results)
	for r := range results {
		if r != "" {
			t.Error(r)
		}
	}
	if n := g.maxOpen.Load(); n != 2 {
		t.Fatalf("%d manifest reads were open at once, want at most (and here exactly) 2", n)
	}
}

// BenchmarkConcurrentManifestGETs sends 32 concurrent GETs of a 4 MiB
// manifest from a local bucket and reports the growth of the process's
// peak resident memory during them (VmHWM after resetting it).
//
//	go test ./agent/registry -run '^$' -bench ConcurrentManifest -benchtime 5x
func BenchmarkConcurrentManifestGETs(b *testing.B) {
	bucket := local.Open(filepath.Join(b.TempDir(), "bucket"))
	if err := bucket.CreateBucket(b.Context()); err != nil {
		b.Fatal(err)
	}
	manifest, d := bigManifest(oci.MaxManifestSize)
	if _, err := bucket.Put(b.Context(), "apps/big/blobs/sha256/"+d[7:], manifest); err != nil {
		b.Fatal(err)
	}
	if _, err := bucket.Put(b.Context(), "apps/big/index.json", tagManifest(manifest, d)); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.LocalObjects(bucket)))
	b.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	var peak float64
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		base := resetPeakRSS(b)
		b.StartTimer()
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				resp, err := client.Get(srv.URL + "/v2/apps/big/manifests/v1")
				if err != nil {
					b.Error(err)
					return
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || n != int64(len(manifest)) {
					b.Errorf("GET = %d, %d bytes", resp.StatusCode, n)
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		peak = max(peak, float64(procStatus(b, "VmHWM")-base)/(1<<20))
		b.StartTimer()
	}
	b.ReportMetric(peak, "peak-RSS-growth-MiB")
}

// resetPeakRSS resets the process's peak resident set (VmHWM) to the
// current one and returns it, in bytes.
func resetPeakRSS(b *testing.B) int64 {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skipf("cannot reset the peak resident set: %v", err)
	}
	return procStatus(b, "VmRSS")
}

// procStatus reads a "kB" field of /proc/self/status, in bytes.
func procStatus(b *testing.B, field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}
