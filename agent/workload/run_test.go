// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"context"
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
	clk.Add(pki.LeafLifetime - pki.RenewBefore)
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
