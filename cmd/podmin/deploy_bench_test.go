// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
	"podmin.dev/podmin/internal/state"
)

// BenchmarkDeployWholeProcess measures podmin deploy as an operator runs
// it, a fresh process against an S3 server (versitygw) and against the
// local store, into an index of 10 and of 10,000 entries (100 NodeGroups, half the entries with a
// Service). Runs alternate between the two indexes, so whatever else
// loads the machine weighs on both alike; it reports the median wall time
// of each and their ratio.
//
// It also measures, in-process, the one cost no deploy can avoid: the
// conditional write of the whole index, the spec's single commit point
// (ms/index-write-*). The 10-entry deploy already pays the small write, so
// no CLI change can bring the ratio below
// (deploy-10 - write-10 + write-10000) / deploy-10, reported as
// ratio-floor:
//
//	go test ./cmd/podmin -run '^$' -bench DeployWholeProcess -benchtime 1x
func BenchmarkDeployWholeProcess(b *testing.B) {
	bin, err := buildPodmin()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("versitygw", func(b *testing.B) {
		srv := objstoretest.StartVersityGW(b)
		benchDeployWholeProcess(b, bin, func(n int) ([]string, objstore.Store) {
			bucket := s3storetest.NewBucket(b, srv)
			seedDeployIndex(b, bucket, n)
			dir := b.TempDir()
			env := append(xdgEnv(dir), "AWS_ENDPOINT_URL_S3="+srv.Endpoint, "AWS_ACCESS_KEY_ID="+srv.AccessKey,
				"AWS_SECRET_ACCESS_KEY="+srv.SecretKey, "AWS_REGION="+srv.Region, "AWS_EC2_METADATA_DISABLED=true",
				"AWS_CONFIG_FILE="+filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "none"))
			runPodmin(b, bin, env, "connect", "demo", "--provider", "aws", "--bucket", bucket.Name())
			return env, bucket
		})
	})
	// The local store isolates the CLI's own cost from the S3 server's:
	// on versitygw a conditional write above 2 MiB is a multipart upload
	// (see s3store's conditionalPutLimit), three requests and a server-side
	// assembly of the 3 MB index.
	b.Run("local", func(b *testing.B) {
		benchDeployWholeProcess(b, bin, func(n int) ([]string, objstore.Store) {
			dir := b.TempDir()
			bucket := local.Open(filepath.Join(dir, "bucket"))
			if err := bucket.CreateBucket(context.Background()); err != nil {
				b.Fatal(err)
			}
			seedDeployIndex(b, bucket, n)
			env := xdgEnv(dir)
			runPodmin(b, bin, env, "connect", "demo", "--provider", "local", "--bucket", bucket.Dir())
			return env, bucket
		})
	})
}

// benchDeployWholeProcess alternates deploys into the contexts that setup
// makes for 10 and 10,000 entries (returning the process environment and
// the bucket) and reports the medians, their ratio, and the floor the
// index write alone puts under that ratio.
func benchDeployWholeProcess(b *testing.B, bin string, setup func(entries int) ([]string, objstore.Store)) {
	type target struct {
		entries int
		env     []string
		store   objstore.Store
		times   []time.Duration
		reads   []time.Duration
		writes  []time.Duration
	}
	var targets []*target
	for _, n := range []int{10, 10_000} {
		t := &target{entries: n}
		t.env, t.store = setup(n)
		runPodmin(b, bin, t.env, "deploy", "web", "-g", "workers", "--image", "hello:v0") // warm the caches
		targets = append(targets, t)
	}
	rounds := max(b.N, 15)
	b.ResetTimer()
	for i := range rounds {
		for _, t := range targets {
			start := time.Now()
			out := runPodmin(b, bin, t.env, "deploy", "web", "-g", "workers", "--image", fmt.Sprintf("hello:v%d", i+1))
			t.times = append(t.times, time.Since(start))
			if !strings.Contains(out, "workers/web updated") {
				b.Fatalf("deploy into %d entries: %s", t.entries, out)
			}
		}
	}
	b.StopTimer()
	for range rounds {
		for _, t := range targets {
			read, write := timeIndexReadWrite(b, t.store)
			t.reads, t.writes = append(t.reads, read), append(t.writes, write)
		}
	}
	median := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	small, large := median(targets[0].times), median(targets[1].times)
	b.ReportMetric(float64(small.Microseconds())/1000, "ms/deploy-10-entries")
	b.ReportMetric(float64(large.Microseconds())/1000, "ms/deploy-10000-entries")
	b.ReportMetric(float64(large)/float64(small), "ratio")
	smallWrite, largeWrite := median(targets[0].writes), median(targets[1].writes)
	b.ReportMetric(float64(smallWrite.Microseconds())/1000, "ms/index-write-10-entries")
	b.ReportMetric(float64(largeWrite.Microseconds())/1000, "ms/index-write-10000-entries")
	b.ReportMetric(float64(median(targets[1].reads).Microseconds())/1000, "ms/index-read-10000-entries")
	b.ReportMetric(float64(small-smallWrite+largeWrite)/float64(small), "ratio-floor")
	b.Logf("%d rounds: median %s at 10 entries, %s at 10,000 entries; the index write alone: %s and %s; reading the 10,000-entry index: %s",
		rounds, small, large, smallWrite, largeWrite, median(targets[1].reads))
}

// timeIndexReadWrite times reading the index's bytes (no decoding) and the
// write every deploy ends with: the index written back under
// compare-and-swap on its ETag, with its metadata, as the committer sends
// it. The index's content does not change.
func timeIndexReadWrite(b *testing.B, store objstore.Store) (read, write time.Duration) {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	cur, err := store.Get(ctx, state.IndexPath, objstore.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	read = time.Since(start)
	start = time.Now()
	if _, err := objstore.PutWithOptions(ctx, store, state.IndexPath, cur.Data,
		objstore.PutOptions{IfMatch: cur.ETag, Metadata: cur.Metadata}); err != nil {
		b.Fatal(err)
	}
	return read, time.Since(start)
}

// runPodmin runs the podmin binary with env and returns its stdout.
func runPodmin(b *testing.B, bin string, env []string, args ...string) string {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("podmin %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// seedDeployIndex gives the bucket an index of n entries of other
// deployments, written as commits leave it (with write metadata).
func seedDeployIndex(b *testing.B, store objstore.Store, n int) {
	b.Helper()
	ix := state.NewIndex()
	// One more than n: the commit that gives it write metadata removes it.
	for i := range n + 1 {
		ng := fmt.Sprintf("ng%02d", i%100)
		k := state.Key{NodeGroup: ng, Name: fmt.Sprintf("app-%05d", i)}
		var e state.Entry
		var err error
		if e.Pod, err = state.PodPayloadPath(ng, fmt.Appendf(nil, "pod %d", i)); err != nil {
			b.Fatal(err)
		}
		if i%2 == 0 {
			if e.Service, err = state.ServicePayloadPath(ng, k.Name, fmt.Appendf(nil, "service %d", i)); err != nil {
				b.Fatal(err)
			}
		}
		if _, _, err := ix.Set(k, e); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	if _, err := store.Put(ctx, state.IndexPath, ix.Encode()); err != nil {
		b.Fatal(err)
	}
	if _, err := state.NewCommitter(store, state.CommitOptions{}).Delete(ctx, state.Key{NodeGroup: "ng00", Name: "app-00000"}); err != nil {
		b.Fatal(err)
	}
}
