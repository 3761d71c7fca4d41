// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package state_test

import (
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
)

// TestS3 runs the request-count, concurrency and fault tests against a real S3
// server (versitygw), whose If-Match and If-None-Match are the ones AWS
// implements, rather than the local store's.
func TestS3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a versitygw server (builds it on first use): run without -short")
	}
	srv := objstoretest.StartVersityGW(t)
	bucket := func(t *testing.T) objstore.Store { return s3storetest.NewBucket(t, srv) }
	t.Run("RequestCounts", func(t *testing.T) { testRequestCounts(t, bucket) })
	t.Run("ConcurrentDistinctKeys", func(t *testing.T) { testConcurrentDistinctKeys(t, bucket(t), noSleepCommitter) })
	t.Run("ConcurrentDistinctKeysProductionBackoff", func(t *testing.T) {
		testConcurrentDistinctKeys(t, bucket(t), productionCommitter)
	})
	t.Run("LostRepliesLinearizable", func(t *testing.T) { runLostReplies(t, bucket(t), lostReplyOps(t, 400)) })
	t.Run("LostReplyWithContentEqualReturn", func(t *testing.T) { testLostReplyWithContentEqualReturn(t, bucket(t)) })
	t.Run("ConcurrentServiceClaim", func(t *testing.T) {
		for range 5 {
			testConcurrentServiceClaim(t, bucket(t))
		}
	})
	t.Run("Faults", func(t *testing.T) { runFaults(t, 1, bucket(t)) })
	t.Run("Rebuild", func(t *testing.T) { testRebuild(t, bucket(t)) })
}

// BenchmarkCommitVersityGW is BenchmarkCommit against a real S3 server.
func BenchmarkCommitVersityGW(b *testing.B) {
	srv := objstoretest.StartVersityGW(b)
	benchCommit(b, func(b *testing.B) objstore.Store { return s3storetest.NewBucket(b, srv) })
}
