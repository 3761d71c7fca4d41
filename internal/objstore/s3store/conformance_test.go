// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package s3store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
)

// TestConformance holds s3store, talking to a real versitygw, to the
// objstore contract.
func TestConformance(t *testing.T) {
	srv := objstoretest.StartVersityGW(t)
	t.Run("versitygw", func(t *testing.T) {
		objstoretest.Run(t, func(t *testing.T) objstore.Store {
			return awsDeleteIfMatch{s3storetest.NewBucket(t, srv)}
		})
	})
	t.Run("versitygw/missing bucket", func(t *testing.T) {
		objstoretest.RunMissingBucket(t, func(t *testing.T) objstore.Store {
			return s3storetest.Open(t, srv, srv.BucketName(t))
		})
	})
}

// awsDeleteIfMatch gives versitygw AWS's answer to a conditional delete of
// a missing key. AWS answers 404 NoSuchKey (which s3store maps to
// ErrNotFound, see TestMapError); versitygw v1.8.0 answers 204 because its
// posix backend skips the If-Match check when the file does not exist
// (backend/posix DeleteObject, evalPreconditions). Only that case is
// adapted, with a HEAD first, which is not atomic and therefore not in
// s3store itself. TestVersityGWDeleteIfMatchMissing records the deviation
// and fails once versitygw is fixed, so this adapter can go.
type awsDeleteIfMatch struct{ *s3store.Bucket }

func (a awsDeleteIfMatch) Delete(ctx context.Context, key, ifMatch string) error {
	if ifMatch != "" {
		if _, err := a.Head(ctx, key); errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("delete-if-match on a missing key (AWS semantics, adapted for versitygw): %w", err)
		}
	}
	return a.Bucket.Delete(ctx, key, ifMatch)
}

func TestVersityGWDeleteIfMatchMissing(t *testing.T) {
	b := s3storetest.NewBucket(t, objstoretest.StartVersityGW(t))
	ctx := context.Background()
	etag, err := b.Put(ctx, "k", []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "k", etag); err != nil {
		t.Fatalf("Delete(current ETag): %v", err)
	}
	err = b.Delete(ctx, "k", etag)
	if err != nil {
		t.Fatalf("versitygw now answers a conditional delete of a missing key with %v (AWS: 404 NoSuchKey): "+
			"remove the awsDeleteIfMatch adapter from TestConformance and this test", err)
	}
	t.Log("known deviation: versitygw v1.8.0 answers DeleteObject If-Match on a missing key with 204; AWS answers 404 NoSuchKey")
}
