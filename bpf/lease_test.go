// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"net/netip"
	"testing"
)

// TestLease: past the lease in config no new flow is given a backend
// (each refusal counted), while flows already open keep theirs both ways;
// a renewed lease opens the Services again. A zero lease, what an agent
// that never renewed leaves, is a lapsed one.
func TestLease(t *testing.T) {
	objs := loaded(t)
	setLease := func(lease uint64) {
		t.Helper()
		if err := objs.Config.Put(uint32(0), VipConfig{Node: words(node), Lease: lease}); err != nil {
			t.Fatal(err)
		}
	}
	other := netip.MustParseAddr("2001:db8:1:2::d")

	// Open a UDP and a TCP flow while the lease is live.
	ret, out := runProg(t, objs, packet(protoUDP, client, vip, 40000, 53, []byte("q")))
	if ret != tcxPass {
		t.Fatalf("UDP under a live lease: verdict %d, want pass", ret)
	}
	udpNAT := parse(out).sport
	if ret, _ = runProg(t, objs, tcpPacket(client, vip, 40001, 80, seg{flags: tcpSYN, seq: 100}, nil)); ret != tcxPass {
		t.Fatalf("SYN under a live lease: verdict %d, want pass", ret)
	}

	for _, lease := range []uint64{monotonic(t) - 1, 0} {
		setLease(lease)
		before := stat(t, objs, StatLeaseExpired)
		for _, in := range [][]byte{
			packet(protoUDP, other, vip, 40000, 53, []byte("q")),
			tcpPacket(other, vip, 40001, 80, seg{flags: tcpSYN, seq: 1}, nil),
		} {
			if ret, _ := runProg(t, objs, in); ret != tcxDrop {
				t.Fatalf("new flow past the lease %d: verdict %d, want drop", lease, ret)
			}
		}
		if after := stat(t, objs, StatLeaseExpired); after != before+2 {
			t.Errorf("lease-expired drops went from %d to %d, want 2 more", before, after)
		}

		// The open flows go on, both ways.
		if ret, _ := runProg(t, objs, packet(protoUDP, client, vip, 40000, 53, []byte("q"))); ret != tcxPass {
			t.Errorf("open UDP flow past the lease: verdict %d, want pass", ret)
		}
		if ret, _ := runProg(t, objs, tcpPacket(client, vip, 40001, 80, seg{flags: tcpACK, seq: 101, ack: 8}, []byte("x"))); ret != tcxPass {
			t.Errorf("open TCP flow past the lease: verdict %d, want pass", ret)
		}
		if ret, back := runProg(t, objs, packet(protoUDP, backend, node, 5353, udpNAT, []byte("a"))); ret != tcxPass || parse(back).src != vip {
			t.Errorf("reply on an open UDP flow past the lease: verdict %d from %v, want pass from the VIP", ret, parse(back).src)
		}
	}

	// On a flow whose end was never seen, the flow's own SYN again is
	// part of that open flow; a SYN with another ISN is a new connection
	// and refused.
	if ret, _ := runProg(t, objs, tcpPacket(client, vip, 40001, 80, seg{flags: tcpSYN, seq: 100}, nil)); ret != tcxPass {
		t.Errorf("the open flow's SYN again past the lease: verdict %d, want pass", ret)
	}
	before := stat(t, objs, StatLeaseExpired)
	if ret, _ := runProg(t, objs, tcpPacket(client, vip, 40001, 80, seg{flags: tcpSYN, seq: 4000}, nil)); ret != tcxDrop {
		t.Fatalf("a new SYN on an open flow's tuple past the lease: verdict %d, want drop", ret)
	}
	if after := stat(t, objs, StatLeaseExpired); after != before+1 {
		t.Errorf("lease-expired drops went from %d to %d, want 1 more", before, after)
	}

	// A SYN that reopens a closed flow is a new connection: refused too.
	runProg(t, objs, tcpPacket(client, vip, 40001, 80, seg{flags: tcpRST | tcpACK, seq: 102, ack: 8}, nil))
	before = stat(t, objs, StatLeaseExpired)
	if ret, _ := runProg(t, objs, tcpPacket(client, vip, 40001, 80, seg{flags: tcpSYN, seq: 5000}, nil)); ret != tcxDrop {
		t.Fatalf("SYN reopening a reset flow past the lease: verdict %d, want drop", ret)
	}
	if after := stat(t, objs, StatLeaseExpired); after != before+1 {
		t.Errorf("lease-expired drops went from %d to %d, want 1 more", before, after)
	}

	setLease(monotonic(t) + 60e9)
	for _, in := range [][]byte{
		packet(protoUDP, other, vip, 40000, 53, []byte("q")),
		tcpPacket(other, vip, 40001, 80, seg{flags: tcpSYN, seq: 1}, nil),
		tcpPacket(client, vip, 40001, 80, seg{flags: tcpSYN, seq: 6000}, nil),
	} {
		if ret, _ := runProg(t, objs, in); ret != tcxPass {
			t.Fatalf("new flow under a renewed lease: verdict %d, want pass", ret)
		}
	}
}
