// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"podmin.dev/podmin/agent/staticpod"
	localstore "podmin.dev/podmin/internal/objstore/local"
)

// The watcher follows the index through the bucket's whole life: absent,
// created, first commit (deployments/ appears), later commits, bucket
// removed and recreated. Each commit is notified.
func TestIndexWatcherFollowsTheBucket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bucket")
	var n atomic.Int64
	w := &staticpod.IndexWatcher{Bucket: dir, Changed: func() { n.Add(1) }, Retry: 10 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}()
	// settle waits until no notification arrived for 30 ms, so the one
	// a new watch sends on its own is not taken for a commit's.
	settle := func() {
		last, since := n.Load(), time.Now()
		waitUntil(t, 20*time.Second, "notifications settle", func() bool {
			if cur := n.Load(); cur != last {
				last, since = cur, time.Now()
			}
			return time.Since(since) > 30*time.Millisecond
		})
	}
	notified := func(what string, act func()) {
		t.Helper()
		settle()
		before := n.Load()
		act()
		waitUntil(t, 20*time.Second, what+" notified", func() bool { return n.Load() > before })
	}
	f := &fixture{bucket: localstore.Open(dir)}
	b := f.bucket
	if err := b.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	notified("first commit", func() { f.deploy(t, "workers", "web", "web:v1", false) })
	notified("second commit", func() { f.deploy(t, "workers", "web", "web:v2", false) })
	notified("bucket removed", func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	})
	if err := b.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	notified("commit to the recreated bucket", func() { f.deploy(t, "workers", "web", "web:v3", false) })
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
