// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"testing"
	"time"

	"podmin.dev/podmin/internal/pki"
)

func benchPods(n int) []Pod {
	pods := make([]Pod, n)
	for i := range pods {
		pods[i] = Pod{Name: fmt.Sprintf("pod-%04d", i), Namespace: "default"}
		if i%2 == 0 {
			pods[i].Service = fmt.Sprintf("svc-%04d", i)
		}
	}
	return pods
}

// BenchmarkIssueLeaf measures signing one workload leaf in memory (key
// generation included), without files.
func BenchmarkIssueLeaf(b *testing.B) {
	key := newKey(b)
	ca, err := pki.NewCA(rand.Reader, key, pki.WorkloadCASpec("demo"), t0)
	if err != nil {
		b.Fatal(err)
	}
	spec := pki.WorkloadLeaf("demo", "product", "web", "frontend")
	b.ReportAllocs()
	for b.Loop() {
		leafKey, err := pki.GenerateKey(rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pki.Issue(rand.Reader, ca, key, leafKey.Public().(ed25519.PublicKey), spec, t0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReconcile1000 measures one pass over 1,000 Pods that all need
// new leaves (a changed bundle or a renewal window): sign, write a
// generation, switch the link, prune. It reports leaves/s.
func BenchmarkReconcile1000(b *testing.B) { benchReconcile(b, "") }

// BenchmarkReconcile1000Tmpfs is BenchmarkReconcile1000 with the node
// root on tmpfs (/dev/shm), as /run is on a node.
func BenchmarkReconcile1000Tmpfs(b *testing.B) {
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		b.Skip("no /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", "podmin-bench-")
	if err != nil {
		b.Skip(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	benchReconcile(b, dir)
}

func benchReconcile(b *testing.B, root string) {
	ctx := context.Background()
	clk := &clock{t: t0}
	m := newManager(b, agentOpts{store: newBucket(b), key: newKey(b), clock: clk, root: root})
	mustRefresh(b, m)
	pods := benchPods(1000)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		clk.Add(pki.LeafLifetime) // every leaf is due
		b.StartTimer()
		ids, err := m.EnsureAll(ctx, pods)
		if err != nil || len(ids) != len(pods) {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(pods)*b.N)/b.Elapsed().Seconds(), "leaves/s")
}

// BenchmarkNoopPass1000 measures a pass over 1,000 Pods whose leaves are
// current (the steady state between renewals), plus the Due check.
func BenchmarkNoopPass1000(b *testing.B) {
	ctx := context.Background()
	clk := &clock{t: t0}
	m := newManager(b, agentOpts{store: newBucket(b), key: newKey(b), clock: clk})
	mustRefresh(b, m)
	pods := benchPods(1000)
	if _, err := m.EnsureAll(ctx, pods); err != nil {
		b.Fatal(err)
	}
	clk.Add(time.Hour)
	for b.Loop() {
		if m.Due() {
			b.Fatal("due")
		}
		ids, err := m.EnsureAll(ctx, pods)
		if err != nil || ids["pod-0000"].Issued {
			b.Fatal(err)
		}
	}
}
