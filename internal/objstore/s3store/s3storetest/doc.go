// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package s3storetest gives tests an s3store.Bucket on a real S3 server: a
// versitygw process started by objstoretest.StartVersityGW, with a fresh
// bucket per caller.
//
// It exists so that objstoretest stays free of backend packages and
// s3store's own tests (package s3store_test) and other packages' tests share
// one way to reach S3. It is imported only by tests and must not be used to
// configure a production client.
package s3storetest
