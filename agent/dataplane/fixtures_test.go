// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"podmin.dev/podmin/bpf"
)

// renew gives dp a lease that outlasts the test, as the agent renews it
// while a leader confirms its snapshot.
func renew(tb testing.TB, dp *Dataplane) {
	tb.Helper()
	if err := dp.Renew(time.Now().Add(time.Hour)); err != nil {
		tb.Fatal(err)
	}
}

func netInterfaceByName(name string) (int, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return 0, err
	}
	return ifc.Index, nil
}

func names(ifcs []Interface) []string {
	var out []string
	for _, i := range ifcs {
		out = append(out, i.Name)
	}
	slices.Sort(out)
	return out
}

// monotonicNow is the clock bpf_ktime_get_ns reads.
func monotonicNow(t testing.TB) uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano())
}

func reverseKey(backend netip.Addr, bport uint16, node netip.Addr, natPort uint16, proto Protocol) bpf.VipFlowKey {
	return bpf.VipFlowKey{Src: addr(backend), Dst: addr(node), Sport: port(bport), Dport: port(natPort), Proto: uint8(proto)}
}

func reverseValue(client netip.Addr, cport uint16, vip netip.Addr, vport uint16, seen uint64) bpf.VipReverse {
	return bpf.VipReverse{Client: addr(client), Vip: addr(vip), Cport: port(cport), Vport: port(vport), Seen: seen}
}
