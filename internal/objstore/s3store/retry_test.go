// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package s3store_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/s3store"
)

// A conditional write whose response is lost must not be retried: the
// retry would fail its own condition and report a write that happened as
// ErrPrecondition.
func TestConditionalWriteNotRetriedAfterLostResponse(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(b *s3store.Bucket) error
		want string
	}{
		{"PutIfAbsent", func(b *s3store.Bucket) error {
			_, err := b.PutIfAbsent(context.Background(), "k", []byte("x"))
			return err
		}, "PUT /state/k"},
		{"PutIfMatch", func(b *s3store.Bucket) error {
			_, err := b.PutIfMatch(context.Background(), "k", []byte("x"), `"e0"`)
			return err
		}, "PUT /state/k"},
		{"DeleteIfMatch", func(b *s3store.Bucket) error {
			return b.Delete(context.Background(), "k", `"e0"`)
		}, "DELETE /state/k"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeS3(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 0 {
					dropConnection(w)
					return
				}
				s3Error(w, 412, "PreconditionFailed") // what a retry would meet
			})
			err := tc.call(f.bucket(t, "eu-west-1"))
			if err == nil || !strings.Contains(err.Error(), "the request may or may not have been applied: read the object to find out") {
				t.Errorf("error = %v, want one saying the outcome is unknown", err)
			}
			for _, s := range []error{objstore.ErrPrecondition, objstore.ErrNotFound} {
				if errors.Is(err, s) {
					t.Errorf("error %v matches %v; an unknown outcome must match no sentinel", err, s)
				}
			}
			if got := f.requests(); !slices.Equal(got, []string{tc.want}) {
				t.Errorf("requests = %q, want exactly one %q", got, tc.want)
			}
		})
	}
}

// Throttling is an answer: S3 did nothing, so even a conditional write is
// retried.
func TestConditionalWriteRetriedWhenThrottled(t *testing.T) {
	t.Parallel()
	f := newFakeS3(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			s3Error(w, 503, "SlowDown")
			return
		}
		if r.Header.Get("If-None-Match") != "*" {
			s3Error(w, 400, "MissingCondition")
			return
		}
		putOK(w)
	})
	etag, err := f.bucket(t, "eu-west-1").PutIfAbsent(context.Background(), "k", []byte("x"))
	if err != nil || etag != `"e1"` {
		t.Fatalf("PutIfAbsent = %q, %v; want \"e1\" after one retry", etag, err)
	}
	if got := f.requests(); len(got) != 2 {
		t.Errorf("requests = %q, want 2", got)
	}
}

// An unconditional write is idempotent, so the SDK's usual retries stay.
func TestUnconditionalPutRetriedAfterLostResponse(t *testing.T) {
	t.Parallel()
	f := newFakeS3(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			dropConnection(w)
			return
		}
		putOK(w)
	})
	etag, err := f.bucket(t, "eu-west-1").Put(context.Background(), "k", []byte("x"))
	if err != nil || etag != `"e1"` {
		t.Fatalf("Put = %q, %v; want \"e1\" after a retry", etag, err)
	}
	if got := f.requests(); !slices.Equal(got, []string{"PUT /state/k", "PUT /state/k"}) {
		t.Errorf("requests = %q, want two PUTs", got)
	}
}
