// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package registry_test

import (
	"bytes"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/agent/registry"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
)

// headerLog records one header of every request a client sends.
type headerLog struct {
	mu     sync.Mutex
	name   string
	values []string
	next   http.RoundTripper
}

func (l *headerLog) RoundTrip(r *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.values = append(l.values, r.Method+" "+r.Header.Get(l.name))
	l.mu.Unlock()
	return l.next.RoundTrip(r)
}

func (l *headerLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.values
	l.values = nil
	return v
}

// On S3 the registry validates a blob's content once, with its own
// SHA-256: its reads do not ask for the object's checksum (the SDK's CRC
// validation is off), and a blob whose stored bytes went bad behind S3's
// back (same size, same ETag, same stored checksum) is caught by the
// digest, logged with its object path, marked bad so that HEAD and GET
// refuse it at once without streaming it again, and served again once
// it is written anew.
func TestS3BlobVerifiedOnceByDigest(t *testing.T) {
	ctx := t.Context()
	srv := objstoretest.StartVersityGW(t)
	bucket := s3storetest.NewBucket(t, srv)
	good := make([]byte, 3<<20)
	_, _ = rand.NewChaCha8([32]byte{9}).Read(good)
	d := digestOf(good)
	key := "apps/hello/blobs/sha256/" + d[7:]
	if _, err := bucket.Put(ctx, key, good); err != nil {
		t.Fatal(err)
	}
	// The agent's store and client, as s3store configures them (the
	// SDK's defaults included), with every request recorded.
	reqs := &headerLog{name: "X-Amz-Checksum-Mode", next: http.DefaultTransport}
	opts := s3storetest.Options(srv, bucket.Name())
	opts.HTTPClient = &http.Client{Transport: reqs}
	agentBucket, err := s3store.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(logs *syncBuffer) (*registry.Handler, string) {
		h := registry.New(registry.S3Objects(agentBucket, agentBucket.Client(), agentBucket.Name()), registry.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
		ts := httptest.NewServer(h)
		t.Cleanup(ts.Close)
		return h, ts.URL + "/v2/apps/hello/blobs/" + d
	}
	_, url := serve(&syncBuffer{})
	if status, body, complete := get(t, "GET", url); status != 200 || !complete || !bytes.Equal(body, good) {
		t.Fatalf("intact blob: %d, complete %v", status, complete)
	}
	if r := reqs.take(); !slices.Equal(r, []string{"HEAD ", "GET "}) {
		t.Fatalf("requests for one GET: %q, want a HEAD and a GET without a checksum mode", r)
	}

	// The stored bytes go bad behind S3's back: one byte flipped, and
	// the file's time kept, so S3 describes the same version.
	file := filepath.Join(srv.Dir, bucket.Name(), filepath.FromSlash(key))
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 0x55
	if err := os.WriteFile(file, bad, fi.Mode()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(file, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	// A registry that has not verified this version yet (one that has
	// vouches for the version it checked).
	var logs syncBuffer
	h, url := serve(&logs)
	reqs.take()
	status, body, complete := get(t, "GET", url)
	if status == 200 && complete {
		t.Fatalf("a blob that does not match its digest was served complete (%d bytes)", len(body))
	}
	if l := logs.String(); !strings.Contains(l, "does not match its digest") || !strings.Contains(l, "object="+key) {
		t.Fatalf("the digest failure is not logged with the object path:\n%s", l)
	}
	if r := reqs.take(); !slices.Equal(r, []string{"HEAD ", "GET "}) {
		t.Fatalf("requests for one GET: %q, want a HEAD and a GET without a checksum mode", r)
	}
	for _, m := range []string{"HEAD", "GET", "HEAD"} {
		if status, _, _ := get(t, m, url); status != 500 {
			t.Errorf("%s of the blob marked bad = %d, want 500", m, status)
		}
	}
	for _, r := range reqs.take() {
		if strings.HasPrefix(r, "GET") {
			t.Fatalf("a blob marked bad was streamed from S3 again: %q", r)
		}
	}
	var metrics strings.Builder
	h.WriteMetrics(&metrics)
	for _, want := range []string{`podmin_agent_registry_refusals_total{reason="digest_mismatch"} 1`, `podmin_agent_registry_refusals_total{reason="known_bad"} 3`} {
		if !strings.Contains(metrics.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, metrics.String())
		}
	}

	// Written anew (the same bytes, so the same ETag, a newer time): it
	// is verified and served again.
	if _, err := bucket.Put(ctx, key, good); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(file, time.Now(), fi.ModTime().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if status, body, complete := get(t, "GET", url); status != 200 || !complete || !bytes.Equal(body, good) {
		t.Fatalf("blob written anew: %d, complete %v", status, complete)
	}
}
