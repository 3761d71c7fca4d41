// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// A model of vip.c's hash, to know which NAT ports a client tuple probes.
func mix(h, v uint32) uint32 {
	h ^= v
	h *= 0x01000193
	h ^= h >> 15
	return h
}

func flowHash(k VipFlowKey, seed uint32) uint32 {
	h := 0x811c9dc5 ^ seed
	for _, w := range k.Src.W {
		h = mix(h, w)
	}
	for _, w := range k.Dst.W {
		h = mix(h, w)
	}
	h = mix(h, uint32(k.Sport)<<16|uint32(k.Dport))
	h = mix(h, uint32(k.Proto))
	h ^= h >> 13
	h *= 0x5bd1e995
	h ^= h >> 15
	return h
}

// probe is the NAT port the client tuple k tries i-th.
func probe(k VipFlowKey, i int) uint16 {
	return NATPortMin + uint16(flowHash(k, 0x9e3779b9+uint32(i))%(NATPortMax-NATPortMin+1))
}

func clientKey(src netip.Addr, sport, vport uint16, proto uint8) VipFlowKey {
	return VipFlowKey{Src: words(src), Dst: words(vip), Sport: be(sport), Dport: be(vport), Proto: proto}
}

// portFor returns a client port of src whose first probe is natPort.
func portFor(t *testing.T, src netip.Addr, vport uint16, proto uint8, natPort uint16) uint16 {
	t.Helper()
	for p := 1024; p < 65536; p++ {
		if probe(clientKey(src, uint16(p), vport, proto), 0) == natPort {
			return uint16(p)
		}
	}
	t.Fatalf("no client port of %v probes NAT port %d first", src, natPort)
	return 0
}

// TestHashModel pins the test's model of the probe order to the program:
// a flow on an empty map gets its first probe.
func TestHashModel(t *testing.T) {
	objs := loaded(t)
	for _, p := range []uint16{1, 40000, 51234, 65535} {
		ret, out := runProg(t, objs, packet(protoTCP, client, vip, p, 80, nil))
		if ret != tcxPass {
			t.Fatalf("verdict %d", ret)
		}
		if got, want := parse(out).sport, probe(clientKey(client, p, 80, protoTCP), 0); got != want {
			t.Fatalf("client port %d got NAT port %d, the model says %d", p, got, want)
		}
	}
}

var client2 = netip.MustParseAddr("2001:db8:1:2::c2")

// handshake opens a TCP flow from client:cport to the VIP with the
// client's ISN 1000 and timestamps from 5000 and the backend's ISN 9000;
// it returns the NAT port.
func handshake(t *testing.T, objs *VipObjects, cport uint16) uint16 {
	t.Helper()
	out := send(t, objs, tcpPacket(client, vip, cport, 80, seg{flags: tcpSYN, seq: 1000, tsval: 5000}, nil), tcxPass)
	p := parse(out).sport
	send(t, objs, tcpPacket(backend, node, 8080, p, seg{flags: tcpSYN | tcpACK, seq: 9000, ack: 1001, tsval: 70}, nil), tcxPass)
	send(t, objs, tcpPacket(client, vip, cport, 80, seg{flags: tcpACK, seq: 1001, ack: 9001, tsval: 5001}, nil), tcxPass)
	return p
}

// send runs in and requires the verdict want.
func send(t *testing.T, objs *VipObjects, in []byte, want int32) []byte {
	t.Helper()
	ret, out := runProg(t, objs, in)
	if ret != want {
		t.Fatalf("verdict %d, want %d for %+v", ret, want, parse(in))
	}
	return out
}

// closes are the ways a flow on NAT port p from client:cport ends.
var closes = map[string]func(t *testing.T, objs *VipObjects, cport, p uint16){
	"backend closes first": func(t *testing.T, objs *VipObjects, cport, p uint16) {
		send(t, objs, tcpPacket(backend, node, 8080, p, seg{flags: tcpFIN | tcpACK, seq: 9001, ack: 1001, tsval: 71}, nil), tcxPass)
		send(t, objs, tcpPacket(client, vip, cport, 80, seg{flags: tcpFIN | tcpACK, seq: 1001, ack: 9002, tsval: 5002}, nil), tcxPass)
		send(t, objs, tcpPacket(backend, node, 8080, p, seg{flags: tcpACK, seq: 9002, ack: 1002, tsval: 72}, nil), tcxPass)
	},
	"client closes first": func(t *testing.T, objs *VipObjects, cport, p uint16) {
		send(t, objs, tcpPacket(client, vip, cport, 80, seg{flags: tcpFIN | tcpACK, seq: 1001, ack: 9001, tsval: 5002}, nil), tcxPass)
		send(t, objs, tcpPacket(backend, node, 8080, p, seg{flags: tcpFIN | tcpACK, seq: 9001, ack: 1002, tsval: 71}, nil), tcxPass)
		send(t, objs, tcpPacket(client, vip, cport, 80, seg{flags: tcpACK, seq: 1002, ack: 9002, tsval: 5003}, nil), tcxPass)
	},
	"both close at once": func(t *testing.T, objs *VipObjects, cport, p uint16) {
		send(t, objs, tcpPacket(client, vip, cport, 80, seg{flags: tcpFIN | tcpACK, seq: 1001, ack: 9001, tsval: 5002}, nil), tcxPass)
		send(t, objs, tcpPacket(backend, node, 8080, p, seg{flags: tcpFIN | tcpACK, seq: 9001, ack: 1001, tsval: 71}, nil), tcxPass)
		send(t, objs, tcpPacket(client, vip, cport, 80, seg{flags: tcpACK, seq: 1002, ack: 9002, tsval: 5003}, nil), tcxPass)
		send(t, objs, tcpPacket(backend, node, 8080, p, seg{flags: tcpACK, seq: 9002, ack: 1002, tsval: 72}, nil), tcxPass)
	},
	"backend resets": func(t *testing.T, objs *VipObjects, cport, p uint16) {
		send(t, objs, tcpPacket(backend, node, 8080, p, seg{flags: tcpRST, seq: 9001}, nil), tcxPass)
	},
	"still open": func(*testing.T, *VipObjects, uint16, uint16) {},
}

// occupy fills every NAT port towards backend port bport but skip with a
// live flow, so that a new flow can get only skip.
func occupy(t *testing.T, objs *VipObjects, bport uint16, proto uint8, skip uint16) {
	t.Helper()
	now := monotonic(t)
	var keys []VipFlowKey
	var vals []VipReverse
	for p := NATPortMin; p <= NATPortMax; p++ {
		if uint16(p) == skip {
			continue
		}
		keys = append(keys, VipFlowKey{Src: words(backend), Dst: words(node), Sport: be(bport), Dport: be(uint16(p)), Proto: proto})
		vals = append(vals, VipReverse{Client: words(netip.MustParseAddr("2001:db8:9::1")), Vip: words(vip), Cport: be(uint16(p)), Vport: be(80), Seen: now})
	}
	if _, err := objs.ReverseFlows.BatchUpdate(keys, vals, nil); err != nil {
		t.Fatal(err)
	}
}

// age moves the last packet of the flow on NAT port p back by d.
func age(t *testing.T, objs *VipObjects, k VipFlowKey, d time.Duration) {
	t.Helper()
	var r VipReverse
	if err := objs.ReverseFlows.Lookup(k, &r); err != nil {
		t.Fatal(err)
	}
	r.Seen -= uint64(d)
	if err := objs.ReverseFlows.Update(k, r, ebpf.UpdateExist); err != nil {
		t.Fatal(err)
	}
}

// TestTimeWaitReservation: a NAT port whose flow the backend closed
// first stays with that flow for the backend's TIME_WAIT, except for a
// SYN the backend accepts in TIME_WAIT (newer timestamps, or a sequence
// number past the old flow's) or one from the same client tuple; other
// closes free the port at once (client first) or after a short grace
// (reset); a port that stays taken counts as exhaustion.
func TestTimeWaitReservation(t *testing.T) {
	const cport = 40000
	for _, tc := range []struct {
		name     string
		close    string
		same     bool          // the new SYN comes from the old flow's client tuple
		seq      uint32        // the new SYN's ISN
		tsval    uint32        // and its timestamp (0: none)
		after    time.Duration // since the old flow's last packet
		accepted bool
	}{
		{"older timestamp", "backend closes first", false, 2000, 4000, 0, false},
		{"newer timestamp", "backend closes first", false, 500, 6000, 0, true},
		{"equal timestamp, sequence past the old flow", "backend closes first", false, 2000, 5002, 0, true},
		{"equal timestamp, sequence behind", "backend closes first", false, 1002, 5002, 0, false},
		{"no timestamp, sequence past the old flow", "backend closes first", false, 1003, 0, 0, true},
		{"no timestamp, sequence behind", "backend closes first", false, 500, 0, 0, false},
		{"same client tuple", "backend closes first", true, 10, 1, 0, true},
		{"TIME_WAIT almost over", "backend closes first", false, 500, 4000, 60 * time.Second, false},
		{"TIME_WAIT over", "backend closes first", false, 500, 4000, 69 * time.Second, true},
		{"client closed first", "client closes first", false, 500, 4000, 0, true},
		{"both closed at once", "both close at once", false, 500, 4000, 0, false},
		{"reset, just now", "backend resets", false, 500, 4000, 0, false},
		{"reset, past the grace period", "backend resets", false, 500, 4000, 2 * time.Second, true},
		{"open", "still open", false, 500, 6000, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := loaded(t)
			p := handshake(t, objs, cport)
			closes[tc.close](t, objs, cport, p)
			rk := VipFlowKey{Src: words(backend), Dst: words(node), Sport: be(8080), Dport: be(p), Proto: protoTCP}
			if tc.after > 0 {
				age(t, objs, rk, tc.after)
			}
			occupy(t, objs, 8080, protoTCP, p)

			from, port := client2, portFor(t, client2, 80, protoTCP, p)
			if tc.same {
				from, port = client, cport
			}
			exhausted := stat(t, objs, StatNATExhausted)
			syn := tcpPacket(from, vip, port, 80, seg{flags: tcpSYN, seq: tc.seq, tsval: tc.tsval}, nil)
			ret, out := runProg(t, objs, syn)
			if !tc.accepted {
				if ret != tcxDrop {
					t.Fatalf("the SYN got port %d (verdict %d); want it refused", parse(out).sport, ret)
				}
				if got := stat(t, objs, StatNATExhausted); got != exhausted+1 {
					t.Errorf("exhaustion counter went from %d to %d", exhausted, got)
				}
				var n uint64
				if err := objs.Exhausted.Lookup(VipExhaustedKey{Backend: words(backend), Port: be(8080), Proto: protoTCP}, &n); err != nil || n == 0 {
					t.Errorf("the backend port's exhaustion count is %d (%v), want it counted", n, err)
				}
				return
			}
			if ret != tcxPass || parse(out).sport != p {
				t.Fatalf("verdict %d, NAT port %d; want the SYN passed on port %d", ret, parse(out).sport, p)
			}
			// The port now belongs to the new flow both ways.
			var r VipReverse
			if err := objs.ReverseFlows.Lookup(rk, &r); err != nil {
				t.Fatal(err)
			}
			if r.Client != words(from) || r.Cport != be(port) {
				t.Errorf("the port's reverse entry is for %v, want %v port %d", r.Client, from, port)
			}
		})
	}
}

// TestUDPPortIdle: a UDP flow's NAT port is free after 30 s without a
// packet, not before.
func TestUDPPortIdle(t *testing.T) {
	for _, tc := range []struct {
		after    time.Duration
		accepted bool
	}{{29 * time.Second, false}, {31 * time.Second, true}} {
		t.Run(tc.after.String(), func(t *testing.T) {
			objs := loaded(t)
			out := send(t, objs, packet(protoUDP, client, vip, 40000, 53, []byte("q")), tcxPass)
			p := parse(out).sport
			age(t, objs, VipFlowKey{Src: words(backend), Dst: words(node), Sport: be(5353), Dport: be(p), Proto: protoUDP}, tc.after)
			occupy(t, objs, 5353, protoUDP, p)
			port := portFor(t, client2, 53, protoUDP, p)
			ret, out := runProg(t, objs, packet(protoUDP, client2, vip, port, 53, []byte("q")))
			if got := ret == tcxPass && parse(out).sport == p; got != tc.accepted {
				t.Fatalf("verdict %d, NAT port %d; want the port given: %v", ret, parse(out).sport, tc.accepted)
			}
		})
	}
}
