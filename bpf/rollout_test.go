// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
)

var (
	// backendNew replaces backend in a rollout: a new Pod, a new address.
	backendNew = netip.MustParseAddr("2001:db8:1:2::b2")
	// vip2 is another Service's VIP.
	vip2 = netip.MustParseAddr("fd50:6f64:6d69::2")
)

// setBackends makes addrs the TCP port 80 Service's backends, in slot
// order, as the agent writes a new backend set: slots first, then the
// count, then the slots above it go.
func setBackends(t *testing.T, objs *VipObjects, addrs ...netip.Addr) {
	t.Helper()
	for i, a := range addrs {
		must(t, objs.Backends.Put(VipBackendKey{Service: 0, Slot: uint32(i)}, VipBackend{Addr: words(a), Port: be(8080)}))
	}
	must(t, objs.Services.Put(VipServiceKey{Vip: words(vip), Port: be(80), Proto: protoTCP}, VipService{Id: 0, Count: uint32(len(addrs))}))
	for i := len(addrs); i < 4; i++ {
		if err := objs.Backends.Delete(VipBackendKey{Service: 0, Slot: uint32(i)}); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			t.Fatal(err)
		}
	}
}

// portHashingTo returns a client port of client whose flows to the VIP's
// port 80 pick slot of a backend set of n.
func portHashingTo(t *testing.T, slot, n uint32) uint16 {
	t.Helper()
	for p := 40000; p < 65536; p++ {
		if flowHash(clientKey(client, uint16(p), 80, protoTCP), 0)%n == slot {
			return uint16(p)
		}
	}
	t.Fatalf("no client port hashes to slot %d of %d", slot, n)
	return 0
}

// TestNewConnectionAfterRollout: a client reuses a source port after its
// flow's backend was replaced (the same tuple, a new ISN). The SYN is a
// new connection and must go to a backend of the Service as it is now,
// however the old flow ended or was left in the maps, never to the
// replaced address, which may belong to another Service's Pod by then.
// The flow's own SYN, retransmitted, stays where it went: that
// connection may already be open on the old backend.
func TestNewConnectionAfterRollout(t *testing.T) {
	const cport = 40000
	fk := clientKey(client, cport, 80, protoTCP)
	rkAt := func(b netip.Addr, p uint16) VipFlowKey {
		return VipFlowKey{Src: words(b), Dst: words(node), Sport: be(8080), Dport: be(p), Proto: protoTCP}
	}
	type step func(t *testing.T, objs *VipObjects, p uint16)
	closeBy := func(name string) step {
		return func(t *testing.T, objs *VipObjects, p uint16) { closes[name](t, objs, cport, p) }
	}
	for _, tc := range []struct {
		name string
		// before runs between the handshake (NAT port p) and the rollout.
		before step
		// reuse makes the old address a backend of another Service.
		reuse bool
	}{
		{"backend closed first", closeBy("backend closes first"), false},
		{"client closed first", closeBy("client closes first"), false},
		{"both closed at once", closeBy("both close at once"), false},
		{"backend reset", closeBy("backend resets"), false},
		// The backend vanished with the Pod: no FIN or reset was seen.
		{"end never seen", closeBy("still open"), false},
		// A segment after the reverse entry was evicted rebuilt it.
		{"reverse entry repaired", func(t *testing.T, objs *VipObjects, p uint16) {
			must(t, objs.ReverseFlows.Delete(rkAt(backend, p)))
			send(t, objs, tcpPacket(client, vip, cport, 80, seg{flags: tcpACK, seq: 1001, ack: 9001, tsval: 5001}, []byte("x")), tcxPass)
		}, false},
		// These held on the program before the fix as well: a flow that
		// lost one side is placed afresh.
		{"forward entry evicted", func(t *testing.T, objs *VipObjects, _ uint16) {
			must(t, objs.ForwardFlows.Delete(fk))
		}, false},
		{"reverse entry evicted", func(t *testing.T, objs *VipObjects, p uint16) {
			must(t, objs.ReverseFlows.Delete(rkAt(backend, p)))
		}, false},
		{"port taken by another flow", func(t *testing.T, objs *VipObjects, p uint16) {
			other := VipReverse{Client: words(client2), Vip: words(vip), Cport: be(1), Vport: be(80), Seen: monotonic(t)}
			must(t, objs.ReverseFlows.Update(rkAt(backend, p), other, ebpf.UpdateExist))
		}, false},
		{"old address now another Service's", closeBy("backend closes first"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := loaded(t)
			p := handshake(t, objs, cport)
			tc.before(t, objs, p)
			var oldEntry VipReverse
			oldErr := objs.ReverseFlows.Lookup(rkAt(backend, p), &oldEntry)

			setBackends(t, objs, backendNew)
			if tc.reuse {
				must(t, objs.Vips.Put(words(vip2), uint32(1)))
				must(t, objs.Services.Put(VipServiceKey{Vip: words(vip2), Port: be(80), Proto: protoTCP}, VipService{Id: 7, Count: 1}))
				must(t, objs.Backends.Put(VipBackendKey{Service: 7, Slot: 0}, VipBackend{Addr: words(backend), Port: be(8080)}))
			}
			newFlows := stat(t, objs, StatNewFlow)
			out := send(t, objs, tcpPacket(client, vip, cport, 80, seg{flags: tcpSYN, seq: 70000, tsval: 9000}, nil), tcxPass)
			if got := parse(out).dst; got != backendNew {
				t.Fatalf("the new connection went to %v, want the current backend %v", got, backendNew)
			}
			if got := stat(t, objs, StatNewFlow); got != newFlows+1 {
				t.Errorf("new flows went from %d to %d, want one more", newFlows, got)
			}
			var fw VipForward
			if err := objs.ForwardFlows.Lookup(fk, &fw); err != nil || fw.Backend != words(backendNew) || fw.NatPort != be(parse(out).sport) {
				t.Errorf("forward entry %+v (%v), want the new backend on NAT port %d", fw, err, parse(out).sport)
			}
			// The new backend's answer reaches the client from the VIP.
			reply := tcpPacket(backendNew, node, 8080, parse(out).sport, seg{flags: tcpSYN | tcpACK, seq: 3, ack: 70001, tsval: 1}, nil)
			if back := parse(send(t, objs, reply, tcxPass)); back != (tuple{vip, client, 80, cport}) {
				t.Errorf("the new backend's SYN-ACK was rewritten to %+v", back)
			}
			// Whatever held the old port is left alone: the old backend
			// may still hold its end of the old connection.
			var after VipReverse
			if err := objs.ReverseFlows.Lookup(rkAt(backend, p), &after); (err == nil) != (oldErr == nil) || (err == nil && after != oldEntry) {
				t.Errorf("the old backend's port entry went from %+v (%v) to %+v (%v)", oldEntry, oldErr, after, err)
			}
		})
	}
}

// TestSYNRetransmissionKeepsBackend: a SYN sent again before an answer
// came stays on the backend its first copy went to, which may have
// answered it, even when that backend left the Service meanwhile; a SYN
// with another ISN on the same tuple is a new connection.
func TestSYNRetransmissionKeepsBackend(t *testing.T) {
	const cport = 40000
	objs := loaded(t)
	first := send(t, objs, tcpPacket(client, vip, cport, 80, seg{flags: tcpSYN, seq: 1000, tsval: 5000}, nil), tcxPass)
	setBackends(t, objs, backendNew)

	newFlows := stat(t, objs, StatNewFlow)
	again := send(t, objs, tcpPacket(client, vip, cport, 80, seg{flags: tcpSYN, seq: 1000, tsval: 6000}, nil), tcxPass)
	if parse(again) != parse(first) {
		t.Fatalf("the retransmitted SYN went to %+v, want %+v like its first copy", parse(again), parse(first))
	}
	if got := stat(t, objs, StatNewFlow); got != newFlows {
		t.Errorf("a retransmission counted as a new flow (%d -> %d)", newFlows, got)
	}
	other := send(t, objs, tcpPacket(client, vip, cport, 80, seg{flags: tcpSYN, seq: 90000, tsval: 9000}, nil), tcxPass)
	if got := parse(other).dst; got != backendNew {
		t.Fatalf("a SYN with a new ISN went to %v, want the current backend %v", got, backendNew)
	}
}

// TestReusedTupleOnCurrentBackend: when the backend set changes but the
// tuple still picks its flow's backend, a new connection on it keeps the
// NAT port, as the backend in TIME_WAIT accepts it from the same client
// tuple (RFC 6191); when the tuple now picks another backend, it goes
// there and the old backend's port entry stays for its TIME_WAIT.
func TestReusedTupleOnCurrentBackend(t *testing.T) {
	for _, tc := range []struct {
		name string
		slot uint32 // the slot of the old backend the tuple picks after the change
	}{{"still picked", 0}, {"another member picked", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			objs := loaded(t)
			cport := portHashingTo(t, tc.slot, 2)
			p := handshake(t, objs, cport)
			closes["backend closes first"](t, objs, cport, p)
			rk := VipFlowKey{Src: words(backend), Dst: words(node), Sport: be(8080), Dport: be(p), Proto: protoTCP}
			var before VipReverse
			must(t, objs.ReverseFlows.Lookup(rk, &before))
			setBackends(t, objs, backend, backendNew)

			out := send(t, objs, tcpPacket(client, vip, cport, 80, seg{flags: tcpSYN, seq: 1, tsval: 1}, nil), tcxPass)
			got := parse(out)
			want := []netip.Addr{backend, backendNew}[tc.slot]
			if got.dst != want {
				t.Fatalf("the new connection went to %v, want %v, which its tuple picks", got.dst, want)
			}
			if tc.slot == 0 && got.sport != p {
				t.Errorf("the new connection got NAT port %d, want its old port %d", got.sport, p)
			}
			if tc.slot == 1 {
				var r VipReverse
				must(t, objs.ReverseFlows.Lookup(rk, &r))
				if r != before {
					t.Errorf("the old backend's port entry went from %+v to %+v; want the closed flow kept for its TIME_WAIT", before, r)
				}
			}
		})
	}
}
