// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package deps

import (
	"context"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
)

// BenchmarkPublishMatching measures setup's dependency step when the
// bucket's manifest already matches: one manifest read and one retention
// listing, no transfers.
//
//	PODMIN_VERSITYGW=... go test ./builtins/deps -run '^$' -bench PublishMatching
func BenchmarkPublishMatching(b *testing.B) {
	ctx := context.Background()
	store := versityBucketB(b)
	cache := &Cache{Dir: b.TempDir()}
	files := syntheticSet(b, cache, 16, 64<<10)
	opts := PublishOptions{Archs: Archs, Files: files, Cache: cache, Images: Images,
		Mirror: func(context.Context, objstore.Store, Image) (ImageEntry, error) { return pauseEntry, nil }}
	if _, err := Publish(ctx, store, opts); err != nil {
		b.Fatal(err)
	}
	counted := faultstore.New(store)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := Publish(ctx, counted, opts)
		if err != nil || res.Written || len(res.Uploaded) != 0 {
			b.Fatalf("%+v %v", res, err)
		}
	}
	c := counted.Counts()
	b.ReportMetric(float64(c.Total())/float64(b.N), "requests/op")
	b.ReportMetric(float64(c.Writes())/float64(b.N), "writes/op")
}

// BenchmarkPublishCold publishes a 500 MiB synthetic set (PODMIN_BENCH_MIB
// overrides) into an empty bucket, from a warm cache, and compares it with
// a plain sequential streaming copy of the same files. It reports
// throughput and the process's peak RSS during the publication.
//
//	PODMIN_VERSITYGW=... go test ./builtins/deps -run '^$' -bench PublishCold -benchtime 1x
func BenchmarkPublishCold(b *testing.B) {
	mib := 500
	if v, err := strconv.Atoi(os.Getenv("PODMIN_BENCH_MIB")); err == nil && v > 0 {
		mib = v
	}
	ctx := context.Background()
	cache := &Cache{Dir: b.TempDir()}
	const count = 20 // 10 dependencies × 2 architectures
	files := syntheticSet(b, cache, count, int64(mib)<<20/count)
	total := int64(0)
	for _, f := range files {
		total += f.Size
	}
	for i := 0; i < b.N; i++ {
		store := versityBucketB(b)
		copyStore := versityBucketB(b)

		start := time.Now()
		for _, f := range files {
			file, err := os.Open(cache.Path(f))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := objstore.WriteObject(ctx, copyStore, f.Path, file, f.Size, objstore.PutOptions{}); err != nil {
				b.Fatal(err)
			}
			file.Close()
		}
		plain := time.Since(start)

		resetPeakRSS()
		start = time.Now()
		res, err := Publish(ctx, store, PublishOptions{Archs: Archs, Files: files, Cache: cache, Concurrency: 4,
			Images: Images, Mirror: func(context.Context, objstore.Store, Image) (ImageEntry, error) { return pauseEntry, nil }})
		if err != nil || len(res.Uploaded) != count {
			b.Fatalf("%d uploaded: %v", len(res.Uploaded), err)
		}
		publish := time.Since(start)
		peak := peakRSS()
		b.ReportMetric(float64(total)/(1<<20)/publish.Seconds(), "publish-MiB/s")
		b.ReportMetric(float64(total)/(1<<20)/plain.Seconds(), "plain-copy-MiB/s")
		b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
		b.Logf("%d MiB: publish %v (verify + upload, concurrency 4), plain sequential copy %v, peak RSS %d MiB",
			total>>20, publish.Round(time.Millisecond), plain.Round(time.Millisecond), peak>>20)
	}
}

// syntheticSet writes count random files of size bytes into cache and
// returns them as resolved files (their URLs are never fetched).
func syntheticSet(b *testing.B, cache *Cache, count int, size int64) []File {
	b.Helper()
	var files []File
	for i := 0; i < count; i++ {
		a := Archs[i%2]
		key := fmt.Sprintf("synthetic%d", i/2)
		f := File{Key: key, Arch: a, Version: "1.0.0", URL: "http://127.0.0.1:1/never",
			Path: fmt.Sprintf("dependencies/%s/%s-v1.0.0-linux-%s", key, key, a), Size: size}
		p := cache.Path(f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		out, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		h := sha512.New()
		if _, err := io.CopyN(io.MultiWriter(out, h), rand.Reader, size); err != nil {
			b.Fatal(err)
		}
		out.Close()
		f.Digest = "sha512:" + hex.EncodeToString(h.Sum(nil))
		files = append(files, f)
	}
	return files
}

// resetPeakRSS resets the kernel's high-water mark (Linux 4.0+).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS returns VmHWM in bytes.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
