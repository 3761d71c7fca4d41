// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package deps

import (
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
)

// versityBucket returns a fresh bucket on a real S3 server.
func versityBucket(t *testing.T) objstore.Store {
	t.Helper()
	return s3storetest.NewBucket(t, objstoretest.StartVersityGW(t))
}

// versityBucketB is versityBucket for benchmarks.
func versityBucketB(b *testing.B) objstore.Store {
	b.Helper()
	return s3storetest.NewBucket(b, objstoretest.StartVersityGW(b))
}
