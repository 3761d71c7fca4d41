// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package s3storetest

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store"
)

// Options returns the s3store options that reach bucket on srv with the
// root user's keys.
func Options(srv *objstoretest.S3Server, bucket string) s3store.Options {
	return s3store.Options{
		Bucket:      bucket,
		Region:      srv.Region,
		Endpoint:    srv.Endpoint,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
	}
}

// Open returns a store for bucket on srv without creating the bucket.
func Open(t testing.TB, srv *objstoretest.S3Server, bucket string) *s3store.Bucket {
	t.Helper()
	b, err := s3store.New(context.Background(), Options(srv, bucket))
	if err != nil {
		t.Fatalf("s3storetest: open bucket %q: %v", bucket, err)
	}
	return b
}

// NewBucket creates a bucket with a fresh name on srv and returns a store
// for it. Buckets live as long as the server.
func NewBucket(t testing.TB, srv *objstoretest.S3Server) *s3store.Bucket {
	t.Helper()
	b := Open(t, srv, srv.BucketName(t))
	if err := b.CreateBucket(context.Background()); err != nil {
		t.Fatalf("s3storetest: %v", err)
	}
	return b
}
