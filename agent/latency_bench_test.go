// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
)

// BenchmarkCommitToFile measures the propagation latency a node sees with
// the default 5 s poll: from a commit (the index compare-and-swap
// returned) to the static Pod file holding the new revision, for 20
// commits at random times. On a local bucket the change notification
// carries it; on S3 (versitygw) the poll does. Run it once:
//
//	go test ./agent -run '^$' -bench CommitToFile -benchtime 1x
func BenchmarkCommitToFile(b *testing.B) {
	const commits = 20
	b.Run("local-notify", func(b *testing.B) {
		bucket := localstore.Open(filepath.Join(b.TempDir(), "bucket"))
		if err := bucket.CreateBucket(b.Context()); err != nil {
			b.Fatal(err)
		}
		benchPropagation(b, bucket, bucket.BucketExists, bucket.Dir(), commits)
	})
	b.Run("versitygw-poll", func(b *testing.B) {
		srv := objstoretest.StartVersityGW(b)
		bucket := s3storetest.NewBucket(b, srv)
		benchPropagation(b, bucket, bucket.BucketExists, "", commits)
	})
}

// benchPropagation runs the agent's reconcile loop (and, for a local
// bucket directory, its index watcher) and reports the p50, p99 and
// maximum commit → file latency in milliseconds.
func benchPropagation(b *testing.B, store objstore.Store, exists func(context.Context) (bool, error), localDir string, commits int) {
	root := b.TempDir()
	rec, err := staticpod.New(staticpod.Options{Store: store, Cluster: "demo", NodeGroup: "workers", Root: root, BucketExists: exists})
	if err != nil {
		b.Fatal(err)
	}
	loop := staticpod.NewLoop(rec, staticpod.LoopOptions{Interval: DefaultPollInterval})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{}, 2)
	go func() { _ = loop.Run(ctx); done <- struct{}{} }()
	if localDir != "" {
		w := &staticpod.IndexWatcher{Bucket: localDir, Changed: loop.Trigger}
		go func() { _ = w.Run(ctx); done <- struct{}{} }()
	} else {
		done <- struct{}{}
	}
	file := filepath.Join(root, "etc", "podmin", "manifests", "web.yaml")
	var lat []time.Duration
	n := 0
	for b.Loop() {
		for range commits {
			// A random moment relative to the poll's phase.
			time.Sleep(time.Duration(rand.Int64N(int64(DefaultPollInterval))))
			n++
			image := fmt.Sprintf("web:v%d", n)
			commit(b, store, "web", image, true)
			start := time.Now()
			for !fileContains(file, image) {
				if time.Since(start) > 3*DefaultPollInterval {
					b.Fatalf("commit %d not published within %v", n, 3*DefaultPollInterval)
				}
				time.Sleep(time.Millisecond)
			}
			lat = append(lat, time.Since(start))
		}
	}
	cancel()
	<-done
	<-done
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	b.ReportMetric(float64(pct(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	b.Logf("%d commits: p50 %v, p99 %v, max %v", len(lat), pct(0.50), pct(0.99), lat[len(lat)-1])
}
