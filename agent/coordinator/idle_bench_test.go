// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// countingStore counts the requests a coordinator makes and the object
// bytes they move.
type countingStore struct {
	objstore.Store
	mu sync.Mutex
	st storeStats
	// unconditional drops If-None-Match from index reads, as the leader's
	// reads were before they were made conditional.
	unconditional bool
}

type storeStats struct {
	requests, gets, notModified, puts int
	indexGets, leasePuts              int
	bytesIn, bytesOut, leaseBytes     int64
}

func (c *countingStore) Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	if c.unconditional && key == state.IndexPath {
		opts.IfNoneMatch = ""
	}
	obj, err := c.Store.Get(ctx, key, opts)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.requests++
	c.st.gets++
	if key == state.IndexPath {
		c.st.indexGets++
	}
	if errors.Is(err, objstore.ErrNotModified) {
		c.st.notModified++
	}
	c.st.bytesIn += int64(len(obj.Data))
	return obj, err
}

func (c *countingStore) put(key string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.requests++
	c.st.puts++
	if key == election.Key {
		c.st.leasePuts++
		c.st.leaseBytes += int64(n)
	}
	c.st.bytesOut += int64(n)
}

func (c *countingStore) PutIfAbsent(ctx context.Context, key string, data []byte) (string, error) {
	c.put(key, len(data))
	return c.Store.PutIfAbsent(ctx, key, data)
}

func (c *countingStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	c.put(key, len(data))
	return c.Store.PutIfMatch(ctx, key, data, etag)
}

func (c *countingStore) stats() storeStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}

func (c *countingStore) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st = storeStats{}
}

// bigIndex commits an index of n deployments, every other one with a
// Service (about 400 bytes an entry, as podmin deploy writes them).
func bigIndex(t testing.TB, store objstore.Store, n int) int {
	t.Helper()
	ix := state.NewIndex()
	for i := range n {
		k, err := state.NewKey("workers", fmt.Sprintf("app-%05d", i))
		if err != nil {
			t.Fatal(err)
		}
		var e state.Entry
		if e.Pod, err = state.PodPayloadPath("workers", fmt.Appendf(nil, "pod %d", i)); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if e.Service, err = state.ServicePayloadPath("default", k.Name, fmt.Appendf(nil, "service %d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := ix.Set(k, e); err != nil {
			t.Fatal(err)
		}
	}
	data := ix.Encode()
	if _, err := store.Put(context.Background(), state.IndexPath, data); err != nil {
		t.Fatal(err)
	}
	return len(data)
}

// BenchmarkIdleLeader measures what an idle leader costs the bucket with
// a 10,000-entry deployment index: requests and bytes per minute at the
// default 5 s renew interval. It runs the real leader loop at a shortened
// interval and scales per renewal, since every renewal does the same
// work: renew the lease, read the index (conditionally: 304 while
// unchanged) and verify the stored snapshot (conditionally). The
// unconditional case reads the index as the leader did before.
func BenchmarkIdleLeader(b *testing.B) {
	for _, conditional := range []bool{true, false} {
		b.Run(map[bool]string{true: "conditional", false: "unconditional"}[conditional], func(b *testing.B) {
			benchIdleLeader(b, !conditional)
		})
	}
}

func benchIdleLeader(b *testing.B, unconditional bool) {
	bucket := newBucket(b)
	size := bigIndex(b, bucket, 10_000)
	counted := &countingStore{Store: bucket, unconditional: unconditional}
	c := newLocalCluster(b, fastTiming, fastRetention, coordinator.IndexServices(counted))
	a := c.start(b, c.spec(0, counted))
	eventually(b, 30*time.Second, "the leader's first snapshot", func() bool {
		s, err := coordinator.LoadDurable(context.Background(), bucket)
		return a.coord.Elector().IsLeader() && err == nil && len(s.Services) == 5_000
	})
	counted.reset()
	cpu0 := cpuTime(b)
	b.ResetTimer()
	deadline := time.Now().Add(time.Minute)
	for counted.stats().leasePuts < b.N {
		if time.Now().After(deadline) {
			b.Fatalf("only %d renewals in a minute", counted.stats().leasePuts)
		}
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	cpu := cpuTime(b) - cpu0
	st := counted.stats()
	if !unconditional && st.puts != st.leasePuts {
		b.Fatalf("the idle leader wrote %d objects besides its %d lease renewals:\n%s", st.puts-st.leasePuts, st.leasePuts, a.logs.String())
	}
	// Per minute at the default interval: one lease renewal and one
	// publish pass (one index read each) per RenewInterval.
	perMinute := float64(time.Minute / election.RenewInterval)
	renewals, passes := float64(st.leasePuts), float64(st.indexGets)
	leaseBytes := float64(st.leaseBytes)
	b.ReportMetric(perMinute*(1+float64(st.requests-st.leasePuts)/passes), "req/min")
	b.ReportMetric(perMinute*(leaseBytes/renewals+float64(st.bytesIn+st.bytesOut-st.leaseBytes)/passes), "B/min")
	b.ReportMetric(perMinute*float64(st.indexGets)/passes, "index-GET/min")
	b.ReportMetric(perMinute*float64(st.notModified)/passes, "304/min")
	b.ReportMetric(perMinute*cpu.Seconds()/passes, "CPU-s/min")
	b.ReportMetric(float64(size), "index-B")
	if !unconditional && strings.Contains(a.logs.String(), "level=ERROR") {
		b.Fatalf("the idle leader logged an error:\n%s", a.logs.String())
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
