// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package s3store_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
)

// requestLog is an HTTP client that records "METHOD /path?query" and can
// drop a response header, to see which S3 calls a method makes.
type requestLog struct {
	mu      sync.Mutex
	reqs    []string
	dropHdr string
}

func (l *requestLog) Do(req *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.reqs = append(l.reqs, req.Method+" "+req.URL.Path+"?"+strings.Split(req.URL.RawQuery, "&")[0])
	l.mu.Unlock()
	resp, err := http.DefaultClient.Do(req)
	if err == nil && l.dropHdr != "" {
		resp.Header.Del(l.dropHdr)
	}
	return resp, err
}

func (l *requestLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.reqs
	l.reqs = nil
	return r
}

// openLogged opens bucket on srv with every request logged.
func openLogged(t *testing.T, srv *objstoretest.S3Server, bucket string) (*s3store.Bucket, *requestLog) {
	log := &requestLog{}
	opts := s3storetest.Options(srv, bucket)
	opts.HTTPClient = log
	b, err := s3store.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return b, log
}

func TestVersityGWBucketAdmin(t *testing.T) {
	srv := objstoretest.StartVersityGW(t)
	ctx := context.Background()
	b, log := openLogged(t, srv, srv.BucketName(t))

	if ok, err := b.BucketExists(ctx); err != nil || ok {
		t.Fatalf("BucketExists before CreateBucket = %v, %v; want false", ok, err)
	}
	if err := b.CreateBucket(ctx); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	if ok, err := b.BucketExists(ctx); err != nil || !ok {
		t.Fatalf("BucketExists after CreateBucket = %v, %v; want true", ok, err)
	}
	if err := b.CreateBucket(ctx); !errors.Is(err, objstore.ErrBucketExists) {
		t.Errorf("second CreateBucket error = %v, want ErrBucketExists", err)
	}

	t.Run("tags", func(t *testing.T) {
		if tags, err := b.BucketTags(ctx); err != nil || len(tags) != 0 {
			t.Fatalf("BucketTags of a new bucket = %v, %v; want none", tags, err)
		}
		for _, want := range []map[string]string{
			{"podmin.dev/cluster": "prod", "podmin.dev/owner": "ab12", "empty": ""},
			{"podmin.dev/cluster": "prod"}, // replaces, does not merge
			{},
		} {
			if err := b.SetBucketTags(ctx, want); err != nil {
				t.Fatalf("SetBucketTags(%v): %v", want, err)
			}
			got, err := b.BucketTags(ctx)
			if err != nil || !maps.Equal(got, want) {
				t.Errorf("BucketTags after SetBucketTags(%v) = %v, %v", want, got, err)
			}
		}
	})

	t.Run("region from HeadBucket", func(t *testing.T) {
		log.take()
		if r, err := b.BucketRegion(ctx); err != nil || r != "us-east-1" {
			t.Errorf("BucketRegion = %q, %v; want us-east-1", r, err)
		}
		if got := log.take(); !slices.Equal(got, []string{"HEAD /" + b.Name() + "?"}) {
			t.Errorf("requests = %q, want a single HeadBucket (versitygw sends x-amz-bucket-region)", got)
		}
	})

	t.Run("region from GetBucketLocation", func(t *testing.T) {
		log.take()
		log.dropHdr = "X-Amz-Bucket-Region"
		defer func() { log.dropHdr = "" }()
		if r, err := b.BucketRegion(ctx); err != nil || r != "us-east-1" {
			t.Errorf("BucketRegion = %q, %v; want us-east-1", r, err)
		}
		if got := log.take(); !slices.Equal(got, []string{"HEAD /" + b.Name() + "?", "GET /" + b.Name() + "?location="}) {
			t.Errorf("requests = %q, want HeadBucket then GetBucketLocation", got)
		}
	})
}

func TestVersityGWMissingBucket(t *testing.T) {
	srv := objstoretest.StartVersityGW(t)
	b := s3storetest.Open(t, srv, "no-such-bucket")
	ctx := context.Background()
	const says = `bucket "no-such-bucket" does not exist in region us-east-1: check the bucket name and region, or create it`
	for name, call := range map[string]func() error{
		"Get":        func() error { _, err := b.Get(ctx, "k", objstore.GetOptions{}); return err },
		"Put":        func() error { _, err := b.Put(ctx, "k", nil); return err },
		"List":       func() error { _, err := b.List(ctx, "", objstore.ListOptions{}); return err },
		"BucketTags": func() error { _, err := b.BucketTags(ctx); return err },
		// HEAD answers carry no error code: Head asks HeadBucket after a 404.
		"Head":         func() error { _, err := b.Head(ctx, "k"); return err },
		"BucketRegion": func() error { _, err := b.BucketRegion(ctx); return err },
	} {
		if err := call(); !errors.Is(err, objstore.ErrBucketNotFound) || errors.Is(err, objstore.ErrNotFound) || !strings.Contains(err.Error(), says) {
			t.Errorf("%s error = %v, want ErrBucketNotFound saying %s", name, err, says)
		}
	}
}

// TestVersityGWETagsRoundTrip checks that the ETag from each source can be
// handed back in a condition: S3 ETags carry quotes, and they must survive
// unchanged through Put, Head, Get and List.
func TestVersityGWETagsRoundTrip(t *testing.T) {
	b := s3storetest.NewBucket(t, objstoretest.StartVersityGW(t))
	ctx := context.Background()
	if _, err := b.Put(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	page, err := b.List(ctx, "k", objstore.ListOptions{})
	if err != nil || len(page.Objects) != 1 {
		t.Fatalf("List = %+v, %v", page, err)
	}
	etag, err := b.PutIfMatch(ctx, "k", []byte("v2"), page.Objects[0].ETag)
	if err != nil {
		t.Fatalf("PutIfMatch(ETag from List): %v", err)
	}
	if _, err := b.Get(ctx, "k", objstore.GetOptions{IfNoneMatch: etag}); !errors.Is(err, objstore.ErrNotModified) {
		t.Errorf("Get(IfNoneMatch: ETag from PutIfMatch) error = %v, want ErrNotModified", err)
	}
	info, err := b.Head(ctx, "k")
	if err != nil || info.ETag != etag {
		t.Fatalf("Head = %+v, %v; want ETag %s", info, err, etag)
	}
	if err := b.Delete(ctx, "k", info.ETag); err != nil {
		t.Errorf("Delete(ETag from Head): %v", err)
	}
}
