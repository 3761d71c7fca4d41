// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package s3store_test

import (
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
)

// BenchmarkObjstoreS3 measures s3store against a local versitygw: the
// figures are client plus gateway cost over loopback, not AWS latency.
func BenchmarkObjstoreS3(b *testing.B) {
	srv := objstoretest.StartVersityGW(b)
	b.Run("versitygw", func(b *testing.B) {
		objstoretest.RunBenchmarks(b, func(b *testing.B) objstore.Store {
			return s3storetest.NewBucket(b, srv)
		})
	})
}

// BenchmarkStreamS3 measures streamed writes and reads and HEAD/range
// costs against a local versitygw.
func BenchmarkStreamS3(b *testing.B) {
	srv := objstoretest.StartVersityGW(b)
	b.Run("versitygw", func(b *testing.B) {
		objstoretest.RunStreamBenchmarks(b, func(b *testing.B) objstore.Store {
			return s3storetest.NewBucket(b, srv)
		})
	})
}
