// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPortRace has two CPUs open flows at the same moment whose first
// NAT port is the same reclaimable port (one whose flow was reset), pair
// after pair, and requires that no two flows ever share a port: each
// flow's forward entry names a port whose reverse entry names that flow.
// Claiming a reclaimable entry by overwriting it would let both CPUs
// think they own it.
func TestPortRace(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("the race needs two CPUs running the program at once; this machine has one")
	}
	objs := loaded(t)
	ifindex := device(t)
	// Each pass takes two ports per pair; a third of them stay free, so
	// that no flow is refused for want of a port.
	const passes, maxPairs = 6, (NATPortMax - NATPortMin + 1) / 6
	clients := [2]netip.Addr{client, client2}

	// Pairs of client tuples whose first probe is the same port, one pair
	// per port.
	type pair [2]uint16 // client ports of clients[0] and clients[1]
	byPort := [2]map[uint16]uint16{{}, {}}
	var pairs []pair
	for p := 1024; p < 65536; p++ {
		for c := range clients {
			natPort := probe(clientKey(clients[c], uint16(p), 80, protoTCP), 0)
			if _, ok := byPort[c][natPort]; ok {
				continue
			}
			byPort[c][natPort] = uint16(p)
			if other, ok := byPort[1-c][natPort]; ok && len(pairs) < maxPairs {
				pr := pair{}
				pr[c], pr[1-c] = uint16(p), other
				pairs = append(pairs, pr)
			}
		}
	}

	violations, collisions := 0, 0
	for range passes {
		// Every port holds a flow that was reset a while ago, so every
		// claim replaces one.
		var keys []VipFlowKey
		var vals []VipReverse
		reset := monotonic(t) - 2e9
		for p := NATPortMin; p <= NATPortMax; p++ {
			keys = append(keys, VipFlowKey{Src: words(backend), Dst: words(node), Sport: be(8080), Dport: be(uint16(p)), Proto: protoTCP})
			vals = append(vals, VipReverse{Client: words(netip.MustParseAddr("2001:db8:9::1")), Vip: words(vip), Cport: be(uint16(p)), Vport: be(80), State: 0x04, Seen: reset})
		}
		if _, err := objs.ReverseFlows.BatchUpdate(keys, vals, nil); err != nil {
			t.Fatal(err)
		}
		for _, pr := range pairs {
			for c := range clients {
				_ = objs.ForwardFlows.Delete(clientKey(clients[c], pr[c], 80, protoTCP))
			}
		}

		// Both CPUs send pair i's SYN once both have arrived at it.
		var arrived atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				var set unix.CPUSet
				set.Set(c)
				if err := unix.SchedSetaffinity(0, &set); err != nil {
					errs <- err
					return
				}
				for i, pr := range pairs {
					arrived.Add(1)
					for arrived.Load() < int64(2*(i+1)) {
					}
					syn := tcpPacket(clients[c], vip, pr[c], 80, seg{flags: tcpSYN, seq: 1}, nil)
					if _, _, err := run(t, objs, syn, ifindex, false); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}

		for _, pr := range pairs {
			var ports [2]uint16
			for c := range clients {
				k := clientKey(clients[c], pr[c], 80, protoTCP)
				var fw VipForward
				if err := objs.ForwardFlows.Lookup(k, &fw); err != nil {
					t.Fatalf("the flow of %v port %d has no forward entry: %v", clients[c], pr[c], err)
				}
				ports[c] = fw.NatPort
				var r VipReverse
				rk := VipFlowKey{Src: words(backend), Dst: words(node), Sport: be(8080), Dport: fw.NatPort, Proto: protoTCP}
				if err := objs.ReverseFlows.Lookup(rk, &r); err != nil || r.Client != k.Src || r.Cport != k.Sport {
					violations++
				}
			}
			if ports[0] == ports[1] {
				collisions++
			}
		}
	}
	t.Logf("%d pairs of flows raced for %d passes", len(pairs), passes)
	if violations > 0 || collisions > 0 {
		t.Fatalf("%d flows lost their NAT port to another and %d pairs share one", violations, collisions)
	}
}
