// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package s3store_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"podmin.dev/podmin/internal/objstore/s3store"
)

// fakeS3 is an HTTP server that answers S3 requests from a per-test script,
// for the failure shapes a real server will not produce on demand: lost
// responses, throttling, other accounts' buckets, other regions.
type fakeS3 struct {
	srv    *httptest.Server
	mu     sync.Mutex
	log    []string
	bodies []string
}

// newFakeS3 serves handle(n, w, r) for the n-th request (from 0).
func newFakeS3(t *testing.T, handle func(n int, w http.ResponseWriter, r *http.Request)) *fakeS3 {
	f := &fakeS3{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		n := len(f.log)
		f.log = append(f.log, r.Method+" "+r.URL.Path)
		f.bodies = append(f.bodies, string(body))
		f.mu.Unlock()
		handle(n, w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// requests returns "METHOD /path" for every request so far.
func (f *fakeS3) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

// body returns the n-th request's body.
func (f *fakeS3) body(n int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[n]
}

// bucket returns a store for bucket "state" on the fake.
func (f *fakeS3) bucket(t *testing.T, region string) *s3store.Bucket {
	b, err := s3store.New(context.Background(), s3store.Options{
		Bucket:      "state",
		Region:      region,
		Endpoint:    f.srv.URL,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
	})
	if err != nil {
		t.Fatalf("s3store.New: %v", err)
	}
	return b
}

// s3Error writes an S3 error document.
func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>scripted</Message><RequestId>R1</RequestId></Error>`, code)
}

// dropConnection closes the connection without answering: the request
// arrived, the response is lost.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

// putOK answers a PutObject.
func putOK(w http.ResponseWriter) {
	w.Header().Set("ETag", `"e1"`)
	w.WriteHeader(http.StatusOK)
}
