// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
)

// TestFlowRepair: when the LRU maps evict one side of a flow, the
// client's next packet rebuilds it (the forward entry from the reverse
// one, found among the flow's probe ports; the reverse entry on the port
// the forward entry names, if no other flow took it). A flow that lost
// both entries, or whose port another flow took, is not guessed at: its
// segments are dropped as without a flow.
func TestFlowRepair(t *testing.T) {
	const cport = 40000
	ack := tcpPacket(client, vip, cport, 80, seg{flags: tcpACK, seq: 1001, ack: 9001, tsval: 5001}, []byte("more"))
	fk := clientKey(client, cport, 80, protoTCP)
	rkFor := func(p uint16) VipFlowKey {
		return VipFlowKey{Src: words(backend), Dst: words(node), Sport: be(8080), Dport: be(p), Proto: protoTCP}
	}
	for _, tc := range []struct {
		name     string
		evict    func(t *testing.T, objs *VipObjects, p uint16)
		repaired bool
	}{
		{"forward entry evicted", func(t *testing.T, objs *VipObjects, _ uint16) {
			must(t, objs.ForwardFlows.Delete(fk))
		}, true},
		{"reverse entry evicted", func(t *testing.T, objs *VipObjects, p uint16) {
			must(t, objs.ReverseFlows.Delete(rkFor(p)))
		}, true},
		{"both evicted", func(t *testing.T, objs *VipObjects, p uint16) {
			must(t, objs.ForwardFlows.Delete(fk))
			must(t, objs.ReverseFlows.Delete(rkFor(p)))
		}, false},
		{"reverse entry evicted and the port taken", func(t *testing.T, objs *VipObjects, p uint16) {
			other := VipReverse{Client: words(netip.MustParseAddr("2001:db8:9::1")), Vip: words(vip), Cport: be(1), Vport: be(80), Seen: monotonic(t)}
			must(t, objs.ReverseFlows.Update(rkFor(p), other, ebpf.UpdateExist))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := loaded(t)
			p := handshake(t, objs, cport)
			tc.evict(t, objs, p)
			repaired, noFlow := stat(t, objs, StatRepaired), stat(t, objs, StatNoFlow)
			ret, out := runProg(t, objs, ack)
			if !tc.repaired {
				if ret != tcxDrop || stat(t, objs, StatNoFlow) != noFlow+1 {
					t.Fatalf("verdict %d; want the segment dropped as without a flow", ret)
				}
				return
			}
			if ret != tcxPass || parse(out).sport != p {
				t.Fatalf("verdict %d, NAT port %d; want the segment forwarded on port %d", ret, parse(out).sport, p)
			}
			if got := stat(t, objs, StatRepaired); got != repaired+1 {
				t.Errorf("repairs went from %d to %d, want one more", repaired, got)
			}
			// Both directions work again.
			reply := tcpPacket(backend, node, 8080, p, seg{flags: tcpACK, seq: 9001, ack: 1005, tsval: 71}, []byte("ok"))
			ret, back := runProg(t, objs, reply)
			if ret != tcxPass || parse(back) != (tuple{vip, client, 80, cport}) {
				t.Fatalf("reply verdict %d, rewritten to %+v", ret, parse(back))
			}
			var fw VipForward
			if err := objs.ForwardFlows.Lookup(fk, &fw); err != nil || fw.NatPort != be(p) {
				t.Errorf("forward entry %+v (%v), want NAT port %d", fw, err, p)
			}
		})
	}

	// A UDP flow whose forward entry was evicted keeps its port too.
	t.Run("UDP forward entry evicted", func(t *testing.T) {
		objs := loaded(t)
		q := []byte("q")
		p := parse(send(t, objs, packet(protoUDP, client, vip, cport, 53, q), tcxPass)).sport
		must(t, objs.ForwardFlows.Delete(clientKey(client, cport, 53, protoUDP)))
		if got := parse(send(t, objs, packet(protoUDP, client, vip, cport, 53, q), tcxPass)).sport; got != p {
			t.Fatalf("the flow moved from NAT port %d to %d", p, got)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
