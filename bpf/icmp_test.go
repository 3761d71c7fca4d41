// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
)

// natFlow is one flow through the program as the packets on either side
// of it look: the client's packet and its forwarded form, the backend's
// reply and the form the client gets.
type natFlow struct {
	name                 string
	proto                uint8
	client, forwarded    []byte // IPv6, no Ethernet header
	reply, reverseNATted []byte
}

// openFlows runs a TCP and a UDP flow through objs.
func openFlows(t *testing.T, objs *VipObjects) []natFlow {
	t.Helper()
	var flows []natFlow
	for _, f := range []struct {
		name  string
		proto uint8
		vport uint16
	}{{"TCP", protoTCP, 80}, {"UDP", protoUDP, 53}} {
		in := packet(f.proto, client, vip, 40000, f.vport, []byte("a request"))
		ret, out := runProg(t, objs, in)
		if ret != tcxPass {
			t.Fatalf("%s forward verdict %d", f.name, ret)
		}
		fwd := parse(out)
		reply := udpIP(backend, node, fwd.dport, fwd.sport, []byte("an answer"))
		if f.proto == protoTCP {
			reply = tcpIP(backend, node, fwd.dport, fwd.sport, seg{flags: tcpSYN | tcpACK, seq: 99, ack: 2}, []byte("an answer"))
		}
		ret, back := runProg(t, objs, ether(reply))
		if ret != tcxPass {
			t.Fatalf("%s reverse verdict %d", f.name, ret)
		}
		flows = append(flows, natFlow{f.name, f.proto, in[14:], out[14:len(in)], reply, back[14 : 14+len(reply)]})
	}
	return flows
}

// TestICMPv6Translation is the table of ICMPv6 errors the program
// translates: each error type about each protocol, raised by the backend,
// by a router on the way, or by the client, arrives with both of its
// headers and both checksums rewritten for the side that sent the packet
// it is about, whose original packet it then embeds byte for byte.
func TestICMPv6Translation(t *testing.T) {
	objs := loaded(t)
	flows := openFlows(t, objs)
	type errorType struct {
		name      string
		typ, code uint8
		info      uint32
	}
	types := []errorType{
		{"packet too big", 2, 0, 1280},
		{"no route", 1, 0, 0},
		{"port unreachable", 1, 4, 0},
		{"hop limit exceeded", 3, 0, 0},
		{"parameter problem", 4, 0, 40},
	}
	for _, f := range flows {
		for _, et := range types {
			for _, dir := range []struct {
				name          string
				from, to      netip.Addr
				about, wanted []byte
				wantFrom      netip.Addr
				wantTo        netip.Addr
			}{
				// About the forwarded packet: for the client.
				{"from the backend", backend, node, f.forwarded, f.client, vip, client},
				{"from a router", router, node, f.forwarded, f.client, router, client},
				// About the reverse-NATed reply: for the backend.
				{"from the client", client, vip, f.reverseNATted, f.reply, node, backend},
			} {
				t.Run(fmt.Sprintf("%s/%s/%s", f.name, et.name, dir.name), func(t *testing.T) {
					in := icmpError(et.typ, et.code, et.info, dir.from, dir.to, dir.about, 1232)
					before := stat(t, objs, StatICMPTranslated)
					ret, out := runProg(t, objs, in)
					if ret != tcxPass {
						t.Fatalf("verdict %d, want pass", ret)
					}
					checkError(t, out[14:len(in)], dir.wantFrom, dir.wantTo, in[14+40:14+48], dir.wanted)
					if after := stat(t, objs, StatICMPTranslated); after != before+1 {
						t.Errorf("translated errors went from %d to %d", before, after)
					}
				})
			}
		}
	}

	// An error that carries only part of the TCP header has no inner
	// checksum to fix; the rest is translated.
	t.Run("cut before the inner checksum", func(t *testing.T) {
		f := flows[0]
		in := icmpError(2, 0, 1280, router, node, f.forwarded, 40+8)
		ret, out := runProg(t, objs, in)
		if ret != tcxPass {
			t.Fatalf("verdict %d, want pass", ret)
		}
		checkError(t, out[14:len(in)], router, client, in[14+40:14+48], f.client[:40+8])
	})

	// The node's own traffic, errors about flows that do not exist and
	// ICMPv6 messages that are not errors.
	own := tcpIP(node, netip.MustParseAddr("2001:db8:99::1"), 45000, 443, seg{flags: tcpSYN, seq: 1}, nil)
	unknown := udpIP(vip, client, 53, 41234, []byte("x"))
	for _, tc := range []struct {
		name string
		in   []byte
		want int32
		stat uint32
	}{
		{"about the node's own traffic", icmpError(2, 0, 1280, router, node, own, 1232), tcxNext, 0},
		{"about an ICMPv6 packet", icmpError(1, 0, 0, router, node, ipv6(protoICMPv6, node, backend, make([]byte, 8), 2), 1232), tcxNext, 0},
		{"to the VIP about no flow", icmpError(1, 4, 0, client, vip, unknown, 1232), tcxDrop, StatICMPNoFlow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before uint64
			if tc.want == tcxDrop {
				before = stat(t, objs, tc.stat)
			}
			ret, out := runProg(t, objs, tc.in)
			if ret != tc.want {
				t.Fatalf("verdict %d, want %d", ret, tc.want)
			}
			if ret == tcxNext && !bytes.Equal(out[:len(tc.in)], tc.in) {
				t.Error("a packet passed on untouched was changed")
			}
			if tc.want == tcxDrop && stat(t, objs, tc.stat) != before+1 {
				t.Errorf("counter %d did not move", tc.stat)
			}
		})
	}

	// The node's own errors (its forwarding found the packet too big, or
	// out of hops) are addressed to the node and loop back: from there
	// they are redirected to the client's interface.
	t.Run("raised by the node, on loopback", func(t *testing.T) {
		f := flows[1]
		in := icmpError(2, 0, 1280, node, node, f.forwarded, 1232)
		ret, out, err := run(t, objs, in, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		if ret != tcxRedirect {
			t.Fatalf("verdict %d, want redirect", ret)
		}
		checkError(t, out[14:len(in)], node, client, in[14+40:14+48], f.client)
	})
}

// checkError checks a translated ICMPv6 error: its addresses, its
// unchanged type, code and info, its checksum and the embedded packet.
func checkError(t *testing.T, ip []byte, from, to netip.Addr, header, embedded []byte) {
	t.Helper()
	if got := tupleOf(ip); got.src != from || got.dst != to {
		t.Errorf("error goes %v -> %v, want %v -> %v", got.src, got.dst, from, to)
	}
	if !bytes.Equal(ip[40:42], header[:2]) || !bytes.Equal(ip[44:48], header[4:8]) {
		t.Errorf("type, code or info changed: % x, want % x", ip[40:48], header)
	}
	if !checksumOK(ip) {
		t.Errorf("ICMPv6 checksum %#04x, want %#04x", binary.BigEndian.Uint16(ip[42:]), l4sum(ip))
	}
	if inner := ip[48:]; !bytes.Equal(inner, embedded) {
		t.Errorf("embedded packet\n% x\nwant\n% x", inner, embedded)
	}
}
