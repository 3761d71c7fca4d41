// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"podmin.dev/podmin/internal/cache"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/state"
)

// bigIndex builds an index of n deployments ng<i mod nodegroups>/app-<i>
// (five digits), half with a Service default/svc-<i>.
func bigIndex(b testing.TB, n, nodegroups int) *state.Index {
	b.Helper()
	ix := state.NewIndex()
	for i := range n {
		ng := fmt.Sprintf("ng%d", i%nodegroups)
		k := state.Key{NodeGroup: ng, Name: fmt.Sprintf("app-%05d", i)}
		e := state.Entry{}
		var err error
		if e.Pod, err = state.PodPayloadPath(ng, fmt.Appendf(nil, "pod %d", i)); err != nil {
			b.Fatal(err)
		}
		if i%2 == 0 {
			if e.Service, err = state.ServicePayloadPath("default", fmt.Sprintf("svc-%05d", i), fmt.Appendf(nil, "svc %d", i)); err != nil {
				b.Fatal(err)
			}
		}
		if _, _, err := ix.Set(k, e); err != nil {
			b.Fatal(err)
		}
	}
	return ix
}

func BenchmarkIndexEncode10k(b *testing.B) {
	ix := bigIndex(b, 10_000, 10)
	b.SetBytes(int64(len(ix.Encode())))
	b.ReportAllocs()
	for b.Loop() {
		ix.Encode()
	}
}

func BenchmarkIndexDecode10k(b *testing.B) {
	data := bigIndex(b, 10_000, 10).Encode()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := state.DecodeIndex(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIndexSet10k is one mutation of a 10,000-entry index, rules
// included (the entry claims a Service identity).
func BenchmarkIndexSet10k(b *testing.B) {
	ix := bigIndex(b, 10_000, 10)
	k := state.Key{NodeGroup: "ng1", Name: "new"}
	pod, _ := state.PodPayloadPath("ng1", []byte("new"))
	svc, _ := state.ServicePayloadPath("default", "new", []byte("new"))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ix.Set(k, state.Entry{Pod: pod, Service: svc}); err != nil {
			b.Fatal(err)
		}
		ix.Remove(k)
	}
}

// BenchmarkIndexCommitCPU10k is the CPU work of one commit round on a
// 10,000-entry index: decode, mutate, encode.
func BenchmarkIndexCommitCPU10k(b *testing.B) {
	data := bigIndex(b, 10_000, 10).Encode()
	k := state.Key{NodeGroup: "ng1", Name: "new"}
	pod, _ := state.PodPayloadPath("ng1", []byte("new"))
	b.ReportAllocs()
	for b.Loop() {
		ix, err := state.DecodeIndex(data)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := ix.Set(k, state.Entry{Pod: pod}); err != nil {
			b.Fatal(err)
		}
		ix.Encode()
	}
}

// BenchmarkCommit measures deploy throughput against the local store with
// 1, 8 and 32 concurrent writers, each updating its own deployment with a
// new Pod payload per operation, with the production settings. Besides
// commits/s it reports the index reads and writes per commit, which show
// how many rounds contention cost.
func BenchmarkCommit(b *testing.B) {
	benchCommit(b, func(b *testing.B) objstore.Store { return newLocal(b) })
}

func benchCommit(b *testing.B, newStore func(b *testing.B) objstore.Store) {
	for _, writers := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			fsc := faultstore.New(newStore(b))
			store := fsc
			// Production settings: default backoff and attempts, and the
			// payload cache the CLI uses.
			c := state.NewCommitter(store, state.CommitOptions{Cache: cache.Open(b.TempDir(), 0)})
			ctx := context.Background()
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			b.ResetTimer()
			start := time.Now()
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						d := deployment("workers", fmt.Sprintf("app%d", w), "default", fmt.Sprintf("x:v%d", i), "")
						if _, err := c.Deploy(ctx, d); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
			cn := fsc.Counts()
			b.ReportMetric(float64(cn.Get)/float64(b.N), "gets/commit")
			b.ReportMetric(float64(cn.PutIfMatch+cn.PutIfAbsent)/float64(b.N), "puts/commit")
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
		})
	}
}

// revisionIndex is an index of n entries, each recording MaxRevisions
// revisions with one image, time and write ID: the largest an index of n
// entries becomes.
func revisionIndex(b testing.TB, n int) []byte {
	b.Helper()
	var sb strings.Builder
	sb.WriteString("{")
	for i := range n {
		k := fmt.Sprintf("ng%d/app-%05d", i%10, i)
		if i > 0 {
			sb.WriteString(",")
		}
		var revs []string
		for r := state.MaxRevisions; r >= 1; r-- {
			pod, _ := state.PodPayloadPath(fmt.Sprintf("ng%d", i%10), fmt.Appendf(nil, "%d-%d", i, r))
			revs = append(revs, fmt.Sprintf(`{"revision":%d,"pod":%q,"images":["registry.podmin.internal/apps/app-%05d:v%d"],"time":"2026-12-07T16:00:00Z","write":"0123456789abcdef"}`, r, pod, i, r))
		}
		pod, _ := state.PodPayloadPath(fmt.Sprintf("ng%d", i%10), fmt.Appendf(nil, "%d-%d", i, state.MaxRevisions))
		fmt.Fprintf(&sb, "%q: {\"pod\": %q, \"revisions\": [%s]}", k, pod, strings.Join(revs, ","))
	}
	sb.WriteString("}")
	ix, err := state.DecodeIndex([]byte(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	return ix.Encode()
}

func BenchmarkIndexDecode1kWithRevisions(b *testing.B) {
	data := revisionIndex(b, 1000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := state.DecodeIndex(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkIndexDecode1k(b *testing.B) {
	data := bigIndex(b, 1000, 10).Encode()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := state.DecodeIndex(data); err != nil {
			b.Fatal(err)
		}
	}
}
