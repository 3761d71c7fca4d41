// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"podmin.dev/podmin/internal/pki"
)

// RestartOffset is deterministic, inside the window, and spreads the
// Pods of a NodeGroup over all of it: 1,000 nodes running one Pod land in
// every tenth of the window, none holding more than twice its share.
func TestRestartOffsetSpreadsOverTheWindow(t *testing.T) {
	const window = 30 * time.Minute
	if a, b := RestartOffset("workers", "node-1", "web", window), RestartOffset("workers", "node-1", "web", window); a != b {
		t.Fatalf("not deterministic: %s, %s", a, b)
	}
	if RestartOffset("workers", "node-1", "web", 0) != 0 {
		t.Fatal("a zero window has an offset")
	}
	var tenths [10]int
	for i := range 1000 {
		off := RestartOffset("workers", fmt.Sprintf("node-%d", i), "web", window)
		if off < 0 || off >= window {
			t.Fatalf("offset %s outside the window", off)
		}
		tenths[off*10/window]++
	}
	for i, n := range tenths {
		if n == 0 || n > 200 {
			t.Errorf("tenth %d of the window holds %d of 1000 restarts: %v", i, n, tenths)
		}
	}
	// The Pods of one node and one Pod on two NodeGroups differ too.
	if RestartOffset("workers", "node-1", "web", window) == RestartOffset("workers", "node-1", "api", window) ||
		RestartOffset("workers", "node-1", "web", window) == RestartOffset("edge", "node-1", "web", window) {
		t.Fatal("offsets ignore the Pod or the NodeGroup")
	}
}

func TestRestartWindowBounds(t *testing.T) {
	for _, w := range []time.Duration{0, time.Minute, MaxRestartWindow} {
		if err := CheckRestartWindow(w); err != nil {
			t.Errorf("%s: %v", w, err)
		}
	}
	for _, w := range []time.Duration{-time.Second, MaxRestartWindow + time.Second} {
		if err := CheckRestartWindow(w); err == nil {
			t.Errorf("%s accepted", w)
		}
	}
	_, err := New(Options{Store: newFakeStore(), Cluster: "demo", Root: t.TempDir(), Key: newKey(t), RestartWindow: 6 * time.Hour})
	if err == nil {
		t.Fatal("a window as long as the renewal window was accepted")
	}
}

// An agent restarted after its Pods' leaves expired (it was down) adopts
// them instead of restarting every Pod at once, and replaces each at its
// point of the window; a changed bundle reaches the adopted generation
// in place.
func TestAdoptExpiredLeafReplacedAtItsPoint(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: t0}
	root, store, key := t.TempDir(), newBucket(t), newKey(t)
	const window = 10 * time.Minute
	opts := agentOpts{store: store, key: key, clock: clk, root: root}
	m := newManagerWith(t, opts, func(o *Options) { o.NodeGroup, o.Node, o.RestartWindow = "workers", "node-1", window })
	mustRefresh(t, m)
	first, err := m.Ensure(ctx, Pod{Name: "web", Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(pki.LeafLifetime + time.Hour)
	restarted := newManagerWith(t, opts, func(o *Options) { o.NodeGroup, o.Node, o.RestartWindow = "workers", "node-1", window })
	mustRefresh(t, restarted)
	id, err := restarted.Ensure(ctx, Pod{Name: "web", Namespace: "default"})
	if err != nil || id.Issued || id.Revision != first.Revision {
		t.Fatalf("expired leaf not adopted: %+v %v", id, err)
	}
	next, ok := restarted.NextDue()
	if want := clk.Now().Add(RestartOffset("workers", "node-1", "web", window)); !ok || !next.Equal(want) {
		t.Fatalf("next replacement %s (%v), want %s", next, ok, want)
	}
	clk.Set(next)
	if id, err := restarted.Ensure(ctx, Pod{Name: "web", Namespace: "default"}); err != nil || !id.Issued {
		t.Fatalf("not replaced at its point: %+v %v", id, err)
	}
}

// A changed bundle is written in place into the generation the Pod
// mounted (and the previous one), without a new leaf.
func TestBundleChangeRewritesCAInPlace(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: t0}
	m := newManager(t, agentOpts{store: newBucket(t), key: newKey(t), clock: clk})
	mustRefresh(t, m)
	pod := Pod{Name: "web", Namespace: "default"}
	first, err := m.Ensure(ctx, pod)
	if err != nil {
		t.Fatal(err)
	}
	gen, err := os.Readlink(filepath.Join(m.PodDir("web"), LinkName))
	if err != nil {
		t.Fatal(err)
	}
	mounted := filepath.Join(m.PodDir("web"), gen)
	before, _ := os.ReadFile(filepath.Join(mounted, CAFile))
	// The rotation point: the leader publishes the next CA as pending.
	m.mu.RLock()
	clk.Set(m.trust.state.Active.NotAfter.Add(-pki.RotateBefore))
	m.mu.RUnlock()
	if !mustRefresh(t, m) || !m.Due() {
		t.Fatal("a changed bundle asks for no pass")
	}
	id, err := m.Ensure(ctx, pod)
	if err != nil || id.Issued || id.Revision != first.Revision {
		t.Fatalf("a bundle change replaced the leaf: %+v %v", id, err)
	}
	after, _ := os.ReadFile(filepath.Join(mounted, CAFile))
	if bytes.Equal(after, before) || !bytes.Equal(after, m.Bundle()) {
		t.Fatal("the mounted generation's ca.crt is not the new bundle")
	}
	if fi, err := os.Stat(filepath.Join(mounted, CAFile)); err != nil || fi.Mode().Perm() != FileMode {
		t.Fatalf("ca.crt after the rewrite: %v", err)
	}
	if m.Due() {
		t.Fatal("still due after the bundle reached the Pod")
	}
}
