// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package coordinator_test

import (
	"slices"
	"testing"
	"time"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
)

// TestLocalNodesOnS3 runs three agents against a real S3 server
// (versitygw): one leader, every endpoint everywhere, the snapshot
// persisted.
func TestLocalNodesOnS3(t *testing.T) {
	srv := objstoretest.StartVersityGW(t)
	bucket := s3storetest.NewBucket(t, srv)
	agents := startLocal(t, bucket, 3, []coordinator.ServiceID{web})
	var want []string
	for _, a := range agents {
		e := a.prefix.Addr().Next()
		want = append(want, e.String())
		a.coord.SetEndpoints([]coordinator.Endpoint{{Service: web, Addr: e}})
	}
	slices.Sort(want)
	eventually(t, 10*time.Second, "every agent sees every endpoint", func() bool {
		for _, a := range agents {
			if !slices.Equal(a.backends(web), want) {
				return false
			}
		}
		return true
	})
	if n, _ := leaderOf(agents); n != 1 {
		t.Errorf("%d leaders", n)
	}
	stored, err := coordinator.LoadDurable(t.Context(), bucket)
	if err != nil || len(stored.Services) != 1 || stored.Generation == 0 {
		t.Fatalf("durable snapshot = %v, %v", stored, err)
	}
}

// BenchmarkSnapshotWriteS3 is BenchmarkSnapshotWrite against versitygw.
func BenchmarkSnapshotWriteS3(b *testing.B) {
	srv := objstoretest.StartVersityGW(b)
	benchSnapshotWrite(b, s3storetest.NewBucket(b, srv))
}
