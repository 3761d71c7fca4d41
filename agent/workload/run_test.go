// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"context"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/internal/pki"
)

// TestRunPokesReconciliation: Run asks for an index-fenced pass when the
// bundle changes and when a leaf enters its renewal window, and not while
// nothing changes.
func TestRunPokesReconciliation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := &clock{t: t0}
	m := newManager(t, agentOpts{store: newFakeStore(), key: newKey(t), clock: clk})
	pokes := make(chan struct{}, 100)
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, 5*time.Millisecond, func() { pokes <- struct{}{} }) }()
	wait := func(what string) {
		t.Helper()
		select {
		case <-pokes:
		case <-time.After(10 * time.Second):
			t.Fatalf("no poke after %s", what)
		}
	}
	wait("the first CA state") // the bundle changed from nothing
	if _, err := m.Ensure(ctx, Pod{Name: "web", Namespace: "default"}); err != nil {
		t.Fatal(err)
	}
	drain := func() {
		for {
			select {
			case <-pokes:
			default:
				return
			}
		}
	}
	// Quiet: poll a number of intervals and expect nothing new.
	drain()
	deadline := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(deadline) {
		select {
		case <-pokes:
			t.Fatal("poked while nothing changed")
		case <-time.After(10 * time.Millisecond):
		}
	}
	clk.Add(pki.LeafLifetime - pki.RenewBefore + DefaultRestartWindow)
	wait("the renewal window")
	if _, err := m.Ensure(ctx, Pod{Name: "web", Namespace: "default"}); err != nil {
		t.Fatal(err)
	}
	drain()
	// The leader publishes a pending CA: the bundle changes.
	m.mu.RLock()
	active := m.trust.state.Active
	m.mu.RUnlock()
	clk.Set(active.NotAfter.Add(-pki.RotateBefore))
	wait("a pending CA")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestIssueTelemetryLeaf(t *testing.T) {
	clk := &clock{t: t0}
	m := newManager(t, agentOpts{store: newFakeStore(), key: newKey(t), clock: clk})
	if _, err := m.IssueLeaf(pki.TelemetryLeaf("demo", "i-0abc")); err == nil {
		t.Fatal("issued before the CA state was read")
	}
	mustRefresh(t, m)
	spec := pki.TelemetryLeaf("demo", "i-0abc")
	l, err := m.IssueLeaf(spec)
	if err != nil {
		t.Fatal(err)
	}
	certs, _ := pki.ParseCertsPEM(l.Bundle)
	if err := pki.CheckLeaf(l.Cert, l.Key, spec, certs, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if l.Cert.URIs[0].String() != "spiffe://demo.podmin.internal/system/otel-logs/node/i-0abc" || len(l.Cert.ExtKeyUsage) != 1 {
		t.Fatalf("telemetry leaf %v %v", l.Cert.URIs, l.Cert.ExtKeyUsage)
	}
}

// shiftedClock is the real clock moved by a settable amount.
type shiftedClock struct {
	mu    sync.Mutex
	shift time.Duration
}

func (c *shiftedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.shift)
}
func (c *shiftedClock) set(d time.Duration) {
	c.mu.Lock()
	c.shift = d
	c.mu.Unlock()
}

// Run wakes for a leaf replacement due before its next interval: a Pod
// restarts at its point of the restart window, not up to an interval
// later.
func TestRunWakesAtTheRestartPoint(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := &shiftedClock{}
	m, err := New(Options{Store: newFakeStore(), Cluster: "demo", Root: t.TempDir(), Key: newKey(t), Now: clk.Now,
		NodeGroup: "workers", Node: "node-1", RestartWindow: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	mustRefresh(t, m)
	id, err := m.Ensure(ctx, Pod{Name: "web", Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	// Move the clock to 200 ms before the leaf's point in its window.
	at := id.NotAfter.Add(-pki.RenewBefore).Add(RestartOffset("workers", "node-1", "web", time.Minute))
	clk.set(at.Add(-200 * time.Millisecond).Sub(time.Now()))
	if m.Due() {
		t.Fatal("due before its point")
	}
	pokes := make(chan struct{}, 10)
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, time.Hour, func() { pokes <- struct{}{} }) }()
	select {
	case <-pokes:
	case <-time.After(20 * time.Second):
		t.Fatal("Run slept through the restart point (its interval is an hour)")
	}
	if now := clk.Now(); now.Before(at) {
		t.Fatalf("poked %s before the restart point", at.Sub(now))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
