// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package oci_test

import (
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"podmin.dev/podmin/agent/registry"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/objstore/s3store"
	"podmin.dev/podmin/internal/state"
)

// streamBenchSize is the layer size of BenchmarkStreamPushServe: 1 GiB,
// or PODMIN_STREAM_BENCH_MIB MiB.
func streamBenchSize(b *testing.B) int64 {
	if v := os.Getenv("PODMIN_STREAM_BENCH_MIB"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			b.Fatalf("PODMIN_STREAM_BENCH_MIB=%q is not a positive number", v)
		}
		return n << 20
	}
	return 1 << 30
}

// BenchmarkStreamPushServe pushes an image with one 1 GiB random layer to
// a local bucket and to a bucket on versitygw, each push in a child
// process whose peak RSS it reports, and serves the layer back through
// the node registry: a first GET on a fresh handler, which hashes the blob
// while it streams, then a second one of the version it verified.
// Throughput is also reported relative to a plain io.Copy of the same
// file: into a new synced file (and the same through SHA-256, which any
// digesting write costs) for pushes, into io.Discard and through
// http.FileServer for serving. Run it alone, once:
//
//	go test ./internal/oci -run '^$' -bench StreamPushServe -benchtime 1x
func BenchmarkStreamPushServe(b *testing.B) {
	size := streamBenchSize(b)
	img := newBigImage(b, size)
	dst, _ := state.AppLayout("big")
	layerKey, _ := dst.BlobPath(img.layer.Digest.String())

	toFile := func() (io.Writer, func() error) {
		f, err := os.CreateTemp(b.TempDir(), "copy-*")
		if err != nil {
			b.Fatal(err)
		}
		return struct{ io.Writer }{f}, func() error {
			err := f.Sync()
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			os.Remove(f.Name())
			return err
		}
	}
	toHashedFile := func() (io.Writer, func() error) {
		w, finish := toFile()
		return io.MultiWriter(w, sha256.New()), finish
	}
	toDiscard := func() (io.Writer, func() error) { return io.Discard, func() error { return nil } }
	rate := func(d time.Duration) float64 { return float64(size) / d.Seconds() }
	// The baselines are measured again right before each measurement they
	// are compared with, as the machine's load changes.
	var copyToFile, copyHashed, copyToDiscard time.Duration
	b.Run("io.Copy-file", func(b *testing.B) {
		for b.Loop() {
			copyToFile = timeCopy(b, img.file, toFile)
		}
		b.ReportMetric(rate(copyToFile)/1e6, "MB/s")
	})
	// What any write that digests its bytes costs at least: the same copy
	// through SHA-256.
	b.Run("io.Copy-sha256-file", func(b *testing.B) {
		for b.Loop() {
			copyHashed = timeCopy(b, img.file, toHashedFile)
		}
		b.ReportMetric(rate(copyHashed)/1e6, "MB/s")
	})
	b.Run("io.Copy-discard", func(b *testing.B) {
		for b.Loop() {
			copyToDiscard = timeCopy(b, img.file, toDiscard)
		}
		b.ReportMetric(rate(copyToDiscard)/1e6, "MB/s")
	})
	files := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(img.file))))
	b.Cleanup(files.Close)
	var fileServer time.Duration
	b.Run("http.FileServer", func(b *testing.B) {
		for b.Loop() {
			fileServer = timeGet(b, files.URL+"/"+filepath.Base(img.file), size)
		}
		b.ReportMetric(rate(fileServer)/1e6, "MB/s")
	})
	parent := b
	for _, newTarget := range targets(b) {
		var last target
		b.Run(newTarget(b).name+"/push", func(b *testing.B) {
			var took time.Duration
			var rss int64
			n := 0
			var base, hashed time.Duration
			for b.Loop() {
				last = newTarget(parent) // the serve benchmark reads it
				b.StopTimer()
				base += timeCopy(b, img.file, toFile)
				hashed += timeCopy(b, img.file, toHashedFile)
				b.StartTimer()
				d, r := pushChild(b, img, last)
				took += d
				rss = max(rss, r)
				n++
			}
			per, base, hashed := took/time.Duration(n), base/time.Duration(n), hashed/time.Duration(n)
			b.ReportMetric(rate(per)/1e6, "MB/s")
			b.ReportMetric(rate(per)/rate(base), "x-io.Copy")
			b.ReportMetric(rate(per)/rate(hashed), "x-io.Copy-sha256")
			b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MiB")
			b.Logf("%s push: %.0f MB/s = %.2f× io.Copy to a synced file (%.0f MB/s just before), %.2f× the same through SHA-256 (%.0f MB/s), peak RSS %.1f MiB",
				last.name, rate(per)/1e6, rate(per)/rate(base), rate(base)/1e6, rate(per)/rate(hashed), rate(hashed)/1e6, float64(rss)/(1<<20))
		})
		if last.bucket == nil {
			continue
		}
		// The store's own ceiling: the same file written with
		// objstore.WriteObject, unverified, handed over as an *os.File
		// (which a store may read at offsets) and as a plain reader (as a
		// push hands it over).
		for _, plain := range []bool{false, true} {
			name := last.name + "/store-write-file"
			if plain {
				name = last.name + "/store-write-reader"
			}
			b.Run(name, func(b *testing.B) {
				var took time.Duration
				n := 0
				for b.Loop() {
					tg := newTarget(parent)
					f, err := os.Open(img.file)
					if err != nil {
						b.Fatal(err)
					}
					var body io.Reader = f
					if plain {
						body = struct{ io.Reader }{f}
					}
					start := time.Now()
					_, err = objstore.WriteObject(b.Context(), tg.bucket, "ceiling/blob", body, size, objstore.PutOptions{IfAbsent: true})
					took += time.Since(start)
					f.Close()
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
				b.ReportMetric(rate(took/time.Duration(n))/1e6, "MB/s")
			})
		}
		b.Run(last.name+"/serve", func(b *testing.B) {
			objects := registryObjects(last.bucket)
			url := "/v2/apps/big/blobs/" + img.layer.Digest.String()
			var took, again, base, fs, direct time.Duration
			n := 0
			for b.Loop() {
				b.StopTimer()
				base += timeCopy(b, img.file, toDiscard)
				fs += timeGet(b, files.URL+"/"+filepath.Base(img.file), size)
				direct += timeDirect(b, last.bucket, layerKey, size)
				b.StartTimer()
				srv := httptest.NewServer(registry.New(objects))
				took += timeGet(b, srv.URL+url, size) // hashed while it streams
				b.StopTimer()
				again += timeGet(b, srv.URL+url, size) // a version already verified
				b.StartTimer()
				srv.Close()
				n++
			}
			d := time.Duration(n)
			per, again, base, fs, direct := took/d, again/d, base/d, fs/d, direct/d
			b.ReportMetric(rate(per)/1e6, "MB/s")
			b.ReportMetric(rate(per)/rate(base), "x-io.Copy")
			b.ReportMetric(rate(per)/rate(fs), "x-FileServer")
			b.ReportMetric(rate(per)/rate(direct), "x-direct")
			b.ReportMetric(rate(again)/1e6, "verified-MB/s")
			b.Logf("%s serve %s: first GET %.0f MB/s = %.2f× io.Copy to io.Discard (%.0f MB/s), %.2f× http.FileServer of the file (%.0f MB/s), %.2f× a streaming read from the store (%.0f MB/s); second GET %.0f MB/s = %.2f× FileServer, %.2f× the store",
				last.name, layerKey, rate(per)/1e6, rate(per)/rate(base), rate(base)/1e6, rate(per)/rate(fs), rate(fs)/1e6, rate(per)/rate(direct), rate(direct)/1e6, rate(again)/1e6, rate(again)/rate(fs), rate(again)/rate(direct))
		})
	}
}

// timeGet times one GET of url, whose body must be size bytes long.
func timeGet(b *testing.B, url string, size int64) time.Duration {
	start := time.Now()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	got, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || got != size {
		b.Fatalf("GET %s: %d, %d bytes, %v", url, resp.StatusCode, got, err)
	}
	return time.Since(start)
}

// timeDirect times one streaming read of key from s, straight from the
// store without the registry.
func timeDirect(b *testing.B, s objstore.Store, key string, size int64) time.Duration {
	start := time.Now()
	r, err := objstore.OpenObject(b.Context(), s, key, objstore.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	got, err := io.Copy(io.Discard, r)
	r.Close()
	if err != nil || got != size {
		b.Fatalf("read %s: %d bytes, %v", key, got, err)
	}
	return time.Since(start)
}

// registryObjects adapts a bucket the way the node agent does.
func registryObjects(s objstore.Store) registry.Objects {
	switch b := s.(type) {
	case *local.Bucket:
		return registry.LocalObjects(b)
	case *s3store.Bucket:
		return registry.S3Objects(b, b.Client(), b.Name())
	}
	return registry.StoreObjects(s)
}

// timeCopy times a plain io.Copy of file into the writer open returns,
// including what its finish function does.
func timeCopy(b *testing.B, file string, open func() (io.Writer, func() error)) time.Duration {
	best := time.Duration(1 << 62)
	for range 1 {
		src, err := os.Open(file)
		if err != nil {
			b.Fatal(err)
		}
		w, finish := open()
		start := time.Now()
		_, err = io.Copy(w, struct{ io.Reader }{src})
		if err == nil {
			err = finish()
		}
		d := time.Since(start)
		src.Close()
		if err != nil {
			b.Fatal(err)
		}
		best = min(best, d)
	}
	return best
}
