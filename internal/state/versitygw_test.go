// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package state_test

import (
	"context"
	"fmt"
	"testing"

	"podmin.dev/podmin/internal/cache"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
	"podmin.dev/podmin/internal/state"
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

// BenchmarkDeployScaleVersityGW is one deploy (an update of one entry,
// with the CLI's payload cache) into indexes of 10 and of 10,000 entries
// over 100 NodeGroups (2.97 MB), in process against a real S3 server: the
// whole commit, index read and write included, without process start.
// Profile the large case with
//
//	go test ./internal/state -run '^$' -bench 'DeployScaleVersityGW/entries=10000' -cpuprofile cpu.out
func BenchmarkDeployScaleVersityGW(b *testing.B) {
	srv := objstoretest.StartVersityGW(b)
	for _, n := range []int{10, 10_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			store := s3storetest.NewBucket(b, srv)
			ctx := context.Background()
			ix := bigIndex(b, n, 100)
			if _, err := store.Put(ctx, state.IndexPath, ix.Encode()); err != nil {
				b.Fatal(err)
			}
			c := state.NewCommitter(store, state.CommitOptions{Cache: cache.Open(b.TempDir(), 0)})
			i := 0
			for b.Loop() {
				i++
				r, err := c.Deploy(ctx, deployment("workers", "web", "default", fmt.Sprintf("hello:v%d", i), ""))
				if err != nil || i > 1 && r.Outcome != state.Updated {
					b.Fatalf("deploy %d: %v %v", i, r.Outcome, err)
				}
			}
		})
	}
}
