// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// TestDiscovery programs the interfaces the spec names and no others: Pod
// veths, the Pod ENI (a default route in a policy table) and the
// lowest-metric default-route interface, not a higher-metric one.
func TestDiscovery(t *testing.T) {
	tp := newTopology(t, "i")
	for _, pair := range [][2]string{{"up0", "up0p"}, {"up1", "up1p"}, {"eni0", "eni0p"}} {
		run(t, "ip", "-n", tp.node, "link", "add", pair[0], "type", "veth", "peer", "name", pair[1])
		run(t, "ip", "-n", tp.node, "link", "set", pair[0], "up")
		run(t, "ip", "-n", tp.node, "link", "set", pair[1], "up")
	}
	run(t, "ip", "-n", tp.node, "-6", "route", "add", "default", "via", "fe80::99", "dev", "up1", "metric", "200")
	run(t, "ip", "-n", tp.node, "-6", "route", "add", "default", "via", "fe80::99", "dev", "up0", "metric", "100")
	run(t, "ip", "-n", tp.node, "-6", "route", "add", "default", "via", "fe80::99", "dev", "eni0", "table", "100")
	run(t, "ip", "-n", tp.node, "-6", "rule", "add", "from", podPrefix.String(), "table", "100")
	// A /128 outside the Pod prefix is not a Pod veth.
	run(t, "ip", "-n", tp.node, "-6", "route", "add", "2001:db8:77::1/128", "dev", "up1p")

	var got []Interface
	tp.in(t, tp.node, func() (err error) {
		got, err = discover(podPrefix, "")
		return err
	})
	if want := []string{"eni0", "hb1", "hb2", "hc", "lo", "up0"}; !slices.Equal(names(got), want) {
		t.Errorf("discovered %v, want %v", names(got), want)
	}

	// A named Pod ENI replaces the policy-table rule.
	tp.in(t, tp.node, func() (err error) {
		got, err = discover(podPrefix, "up1p")
		return err
	})
	if want := []string{"hb1", "hb2", "hc", "lo", "up0", "up1p"}; !slices.Equal(names(got), want) {
		t.Errorf("with the Pod ENI named: discovered %v, want %v", names(got), want)
	}
}

// TestReconcileFollowsInterfaces attaches to a Pod veth that appears after
// Apply once Run gets a refresh hint, and lets go of one that disappears.
func TestReconcileFollowsInterfaces(t *testing.T) {
	f := newFixture(t, "r")
	f.apply(t, service(backend1, backend2))

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.dp.Run(ctx) }()

	// Applies racing with hints and reconciliation (for the race detector).
	applied := make(chan error, 1)
	go func() {
		for i := range 20 {
			b := []netip.Addr{backend1, backend2}[:1+i%2]
			if err := f.dp.Apply(ctx, []Service{service(b...)}); err != nil {
				applied <- err
				return
			}
			f.dp.Refresh()
		}
		applied <- f.dp.Apply(ctx, []Service{service(backend1, backend2)})
	}()
	if err := <-applied; err != nil {
		t.Fatal(err)
	}

	// A new Pod on the node.
	extra := f.client + "e"
	run(t, "ip", "netns", "add", extra)
	t.Cleanup(func() { run(t, "ip", "netns", "del", extra) })
	f.pod(t, extra, "hx", netip.MustParseAddr("2001:db8:1:2::e"))
	f.dp.Refresh()
	f.dp.Refresh() // hints coalesce
	waitFor(t, "the new Pod veth to be attached", func() bool {
		return slices.Contains(names(f.dp.Interfaces()), "hx")
	})
	if n := f.attachedPrograms(t, "hx"); n != 1 {
		t.Errorf("hx has %d TCX ingress programs, want 1", n)
	}

	// The backend b2 Pod goes away.
	run(t, "ip", "-n", f.node, "link", "del", "hb2")
	f.dp.Refresh()
	waitFor(t, "the removed veth to be forgotten", func() bool {
		return !slices.Contains(names(f.dp.Interfaces()), "hb2")
	})

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Run stops the dataplane when its context ends.
	for _, ifc := range []string{"hb1", "hc", "hx"} {
		if n := f.attachedPrograms(t, ifc); n != 0 {
			t.Errorf("%s still has %d programs after Run returned", ifc, n)
		}
	}
}

// TestDetachWithoutServices detaches when the last Service goes, leaves
// traffic to the old VIP to the kernel, and attaches again when a Service
// comes back. Stop detaches everywhere.
func TestDetachWithoutServices(t *testing.T) {
	f := newFixture(t, "e")
	f.apply(t, service(backend1))
	if n := f.attachedPrograms(t, "hc"); n != 1 {
		t.Fatalf("hc has %d programs, want 1", n)
	}

	f.apply(t)
	if got := f.dp.Interfaces(); len(got) != 0 {
		t.Errorf("attached to %v with no Services", names(got))
	}
	for _, ifc := range []string{"hb1", "hb2", "hc", "lo"} {
		if n := f.attachedPrograms(t, ifc); n != 0 {
			t.Errorf("%s has %d programs with no Services, want 0", ifc, n)
		}
	}
	if c, err := f.dial(t, vipTCP, 300*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("the removed Service's VIP still answers")
	}

	f.apply(t, service(backend2))
	c, err := f.dial(t, vipTCP, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ask(c)
	c.Close()
	if err != nil || r.backend != "b2" {
		t.Fatalf("after the Service came back: %v, %v", r, err)
	}

	if err := f.dp.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, ifc := range []string{"hb1", "hb2", "hc", "lo"} {
		if n := f.attachedPrograms(t, ifc); n != 0 {
			t.Errorf("%s has %d programs after Stop, want 0", ifc, n)
		}
	}
	if err := f.dp.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := f.dp.Apply(t.Context(), []Service{service(backend1)}); err == nil {
		t.Error("Apply after Stop succeeded")
	}
}

// TestApplyWritesOnlyChanges counts real map writes.
func TestApplyWritesOnlyChanges(t *testing.T) {
	f := newFixture(t, "w")
	f.apply(t, service(backend1, backend2))
	// config, 6 ports x 2 backends, 6 service keys, 1 VIP
	if f.dp.writes != 1+12+6+1 {
		t.Errorf("first Apply made %d writes, want 20", f.dp.writes)
	}
	w := f.dp.writes
	f.apply(t, service(backend2, backend1)) // same set, other order
	if f.dp.writes != w {
		t.Errorf("re-applying the same Services made %d writes", f.dp.writes-w)
	}
	w = f.dp.writes
	f.apply(t, service(backend1))
	// per port: slot 1 deleted, count lowered (slot 0 already b1)
	if f.dp.writes-w != 12 {
		t.Errorf("removing a backend made %d writes, want 12", f.dp.writes-w)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
