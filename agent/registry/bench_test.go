// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package registry_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

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

// timed returns how long f takes.
func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// serveRatios runs b.N rounds of: a baseline read of the blob, a first
// GET through a fresh registry handler (nothing verified yet), and a
// second GET through the same handler; the three are interleaved so load
// changes hit them alike. It reports the registry's throughput and both
// GETs relative to the baseline, and logs every round.
func serveRatios(b *testing.B, size int64, baseline string, readBaseline func(), newHandler func() http.Handler, url string) {
	var base, first, again time.Duration
	client := &http.Client{}
	rounds := 0
	for b.Loop() {
		b.StopTimer()
		bd := timed(readBaseline)
		srv := httptest.NewServer(newHandler())
		b.StartTimer()
		fd := timed(func() {
			if fetch(b, client, srv.URL+url) != size {
				b.Fatal("short body")
			}
		})
		b.StopTimer()
		ad := timed(func() {
			if fetch(b, client, srv.URL+url) != size {
				b.Fatal("short body")
			}
		})
		srv.Close()
		client.CloseIdleConnections()
		b.StartTimer()
		b.Logf("round %d: %s %.0f MB/s, first GET %.2f×, second GET %.2f×", rounds, baseline, float64(size)/bd.Seconds()/1e6, bd.Seconds()/fd.Seconds(), bd.Seconds()/ad.Seconds())
		base, first, again = base+bd, first+fd, again+ad
		rounds++
	}
	b.SetBytes(size)
	b.ReportMetric(base.Seconds()/first.Seconds(), "first-x-"+baseline)
	b.ReportMetric(base.Seconds()/again.Seconds(), "second-x-"+baseline)
}

// BenchmarkServe256MiB serves a 256 MiB blob through the registry, every
// round from a fresh handler so that each first GET is one nothing has
// verified before:
//
//   - local: the blob written through the store, as a push does, against a
//     plain Go file server of the same file. The registry takes the store's
//     content digest as proof and sends the file with sendfile(2).
//   - versitygw: against a streaming GET of the same object straight from
//     the S3 server, plain (direct) and with the SDK's default CRC64
//     validation (sdkdirect). The registry hashes while streaming, a few
//     chunks behind the copy, and leaves the SDK's CRC64 off.
//
// Run it alone: go test ./agent/registry -run '^$' -bench Serve256MiB -benchtime 10x
func BenchmarkServe256MiB(b *testing.B) {
	const size = 256 << 20
	b.Run("local", func(b *testing.B) {
		bucket, digest := writeBlob(b, size)
		files := httptest.NewServer(http.FileServer(http.Dir(bucket.Dir())))
		b.Cleanup(files.Close)
		client := &http.Client{}
		serveRatios(b, size, "fileserver",
			func() { fetch(b, client, files.URL+"/apps/big/blobs/sha256/"+digest) },
			func() http.Handler { return registry.New(registry.LocalObjects(bucket)) },
			"/v2/apps/big/blobs/sha256:"+digest)
	})
	b.Run("versitygw", func(b *testing.B) {
		srv := objstoretest.StartVersityGW(b)
		bucket := s3storetest.NewBucket(b, srv)
		blob, digest := randomFile(b, size)
		key := "apps/big/blobs/sha256/" + digest
		f, err := os.Open(blob)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if _, err := bucket.Write(b.Context(), key, f, size, objstore.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		// direct is a plain streaming GET; sdkdirect the same GET with
		// the SDK's default response checksum validation (CRC64), as an
		// S3 client reads by default.
		for _, baseline := range []struct {
			name string
			opts []func(*s3.Options)
		}{
			{"direct", []func(*s3.Options){func(o *s3.Options) { o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired }}},
			{"sdkdirect", nil},
		} {
			b.Run(baseline.name, func(b *testing.B) {
				serveRatios(b, size, baseline.name,
					func() {
						out, err := bucket.Client().GetObject(b.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket.Name()), Key: aws.String(key)}, baseline.opts...)
						if err != nil {
							b.Fatal(err)
						}
						defer out.Body.Close()
						if n, err := io.Copy(io.Discard, out.Body); err != nil || n != size {
							b.Fatalf("direct read: %d bytes, %v", n, err)
						}
					},
					func() http.Handler { return registry.New(registry.S3Objects(bucket, bucket.Client(), bucket.Name())) },
					"/v2/apps/big/blobs/sha256:"+digest)
			})
		}
	})
}

// randomFile writes size random bytes to a temporary file and returns its
// path and the hex SHA-256 of its content.
func randomFile(b *testing.B, size int) (string, string) {
	h := sha256.New()
	f, err := os.CreateTemp(b.TempDir(), "blob-*")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, min(size, 1<<20))
	for range size / len(chunk) {
		_, _ = rand.Read(chunk)
		if _, err := f.Write(chunk); err != nil {
			b.Fatal(err)
		}
		h.Write(chunk)
	}
	return f.Name(), hex.EncodeToString(h.Sum(nil))
}

// writeBlob writes size random bytes as a blob of apps/big in a new local
// bucket, through the store as a push does, and returns the bucket and the
// blob's hex digest.
func writeBlob(b *testing.B, size int) (*local.Bucket, string) {
	bucket := local.Open(filepath.Join(b.TempDir(), "bucket"))
	if err := bucket.CreateBucket(b.Context()); err != nil {
		b.Fatal(err)
	}
	blob, digest := randomFile(b, size)
	f, err := os.Open(blob)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := bucket.Write(b.Context(), "apps/big/blobs/sha256/"+digest, f, int64(size), objstore.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	return bucket, digest
}

// BenchmarkRangeTTFB is the time to the first byte of a 100-byte Range
// request, for a small and a 256 MiB blob: it must not grow with the blob.
func BenchmarkRangeTTFB(b *testing.B) {
	for _, size := range []int{1 << 20, 256 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			bucket, digest := writeBlob(b, size)
			objects := registry.LocalObjects(bucket)
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
