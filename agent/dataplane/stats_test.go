// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bytes"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"podmin.dev/podmin/bpf"
)

// TestMemoryAtStart: the program's maps take their full size in locked
// kernel memory when the dataplane loads, before any Service exists. With
// the default limits that is under 8 MiB, as the documented formula says,
// and the agent logs the figure; configured limits change it.
func TestMemoryAtStart(t *testing.T) {
	requireRoot(t)
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []bpf.Limits{{}, {Services: 4096, Backends: 16384, Flows: 65536}} {
		var log bytes.Buffer
		dp, err := New(Config{NodeAddr: nodeIP, Limits: l, Log: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		got := dp.LockedMemory()
		if err := dp.Stop(); err != nil {
			t.Fatal(err)
		}
		if l == (bpf.Limits{}) {
			l = bpf.DefaultLimits
			if got > 8<<20 {
				t.Errorf("the default limits lock %d bytes, want under 8 MiB", got)
			}
		}
		want, err := bpf.Memory(l, cpus)
		if err != nil {
			t.Fatal(err)
		}
		if float64(got) > 1.02*float64(want) || float64(got) < 0.98*float64(want) {
			t.Errorf("limits %+v lock %d bytes, the formula says %d", l, got, want)
		}
		if !strings.Contains(log.String(), "msg=\"dataplane loaded\" locked_bytes="+strconv.FormatUint(got, 10)) {
			t.Errorf("the load was logged as %q, want the locked bytes", log.String())
		}
		t.Logf("limits %+v, %d CPUs: %d bytes (%.1f MiB) locked at start", l, cpus, got, float64(got)/(1<<20))
	}
}

// flowEntries returns the keys of the forward and reverse entries of the
// one TCP flow through the VIP.
func (f *fixture) flowEntries(t *testing.T) (fwd, rev bpf.VipFlowKey) {
	t.Helper()
	var k bpf.VipFlowKey
	var v bpf.VipForward
	n := 0
	for it := f.dp.objs.ForwardFlows.Iterate(); it.Next(&k, &v); {
		if k.Proto == uint8(TCP) {
			fwd, n = k, n+1
			rev = reverseKey(netAddr(v.Backend), port(v.Bport), nodeIP, port(v.NatPort), TCP)
		}
	}
	if n != 1 {
		t.Fatalf("%d TCP flows, want 1", n)
	}
	return fwd, rev
}

// TestFlowRepairThroughVIP evicts one side of a live TCP connection's
// flow (as a full LRU map would) and keeps talking: the client's next
// segment rebuilds it. With both sides gone the connection is lost: its
// segments are dropped, not given a new port the backend does not know.
func TestFlowRepairThroughVIP(t *testing.T) {
	f := newFixture(t, "y")
	f.apply(t, service(backend1))
	c, err := f.dial(t, vipTCP, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first, err := ask(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, evict := range []string{"forward", "reverse"} {
		fwd, rev := f.flowEntries(t)
		m, k := f.dp.objs.ForwardFlows, fwd
		if evict == "reverse" {
			m, k = f.dp.objs.ReverseFlows, rev
		}
		if err := m.Delete(k); err != nil {
			t.Fatal(err)
		}
		before := f.stats(t).Repaired
		r, err := ask(c)
		if err != nil || r != first {
			t.Fatalf("after the %s entry was evicted: %v, %v; want %v", evict, r, err, first)
		}
		if after := f.stats(t).Repaired; after != before+1 {
			t.Errorf("repairs went from %d to %d after the %s entry was evicted", before, after, evict)
		}
	}

	fwd, rev := f.flowEntries(t)
	if err := f.dp.objs.ForwardFlows.Delete(fwd); err != nil {
		t.Fatal(err)
	}
	if err := f.dp.objs.ReverseFlows.Delete(rev); err != nil {
		t.Fatal(err)
	}
	before := f.stats(t).Drops[DropNoFlow]
	if err := c.SetDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("who\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 64)); err == nil {
		t.Fatal("a connection whose flow was evicted both ways still got an answer")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("read: %v, want a timeout", err)
	}
	if after := f.stats(t).Drops[DropNoFlow]; after <= before {
		t.Errorf("segments without a flow went from %d to %d, want them counted", before, after)
	}
	if fwdKeys := f.forwardKeys(t); slices.Contains(fwdKeys, fwd) {
		t.Error("the lost flow got a forward entry again")
	}
}

func (f *fixture) forwardKeys(t *testing.T) []bpf.VipFlowKey {
	t.Helper()
	var k bpf.VipFlowKey
	var v bpf.VipForward
	var out []bpf.VipFlowKey
	it := f.dp.objs.ForwardFlows.Iterate()
	for it.Next(&k, &v) {
		out = append(out, k)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
