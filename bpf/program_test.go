// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestRewriteChecksums runs crafted packets through the program in the
// kernel and checks the NAT rewrite and the recomputed checksums both
// ways, for TCP and UDP, with and without BPF_F_IPV6, on packets with
// CHECKSUM_COMPLETE: the kernel fails a run whose rewrite leaves skb->csum
// wrong (EBADMSG), which is what BPF_F_IPV6 exists for.
func TestRewriteChecksums(t *testing.T) {
	for _, mode := range csumModes(t) {
		objs := loadFor(t, LoadOptions{CsumIPv6: mode.flag})
		for _, tc := range []struct {
			name        string
			proto       uint8
			vport, port uint16
		}{{"TCP", protoTCP, 80, 8080}, {"UDP", protoUDP, 53, 5353}} {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				in := packet(tc.proto, client, vip, 40000, tc.vport, []byte("hello, odd length"))
				ret, out, err := run(t, objs, in, device(t), true)
				if err != nil {
					t.Fatalf("forward: %v", err)
				}
				if ret != tcxPass {
					t.Fatalf("verdict %d, want pass", ret)
				}
				got := parse(out)
				if got.src != node || got.dst != backend || got.dport != tc.port || got.sport < NATPortMin || got.sport > NATPortMax {
					t.Fatalf("forward rewrite gave %+v, want %v:30000-32767 -> %v:%d", got, node, backend, tc.port)
				}
				if !checksumOK(out[14:]) {
					t.Errorf("forward checksum %#04x, want %#04x", binary.BigEndian.Uint16(out[14+40+csumOff(tc.proto):]), l4sum(out[14:]))
				}

				// The backend's answer comes back to the NAT port.
				reply := packet(tc.proto, backend, node, tc.port, got.sport, []byte("hi"))
				if tc.proto == protoTCP {
					reply = tcpPacket(backend, node, tc.port, got.sport, seg{flags: tcpSYN | tcpACK, seq: 7, ack: 2}, []byte("hi"))
				}
				ret, back, err := run(t, objs, reply, device(t), true)
				if err != nil {
					t.Fatalf("reverse: %v", err)
				}
				if ret != tcxPass {
					t.Fatalf("reply verdict %d, want pass", ret)
				}
				want := tuple{vip, client, tc.vport, 40000}
				if g := parse(back); g != want {
					t.Fatalf("reverse rewrite gave %+v, want %+v", g, want)
				}
				if !checksumOK(back[14:]) {
					t.Errorf("reverse checksum %#04x, want %#04x", binary.BigEndian.Uint16(back[14+40+csumOff(tc.proto):]), l4sum(back[14:]))
				}

				// An error about the forwarded packet, for the client.
				icmp := icmpError(2, 0, 1280, router, node, out[14:len(in)], 1232)
				ret, translated, err := run(t, objs, icmp, device(t), true)
				if err != nil {
					t.Fatalf("ICMPv6 error: %v", err)
				}
				if ret != tcxPass {
					t.Fatalf("ICMPv6 error verdict %d, want pass", ret)
				}
				checkError(t, translated[14:len(icmp)], router, client, icmp[14+40:14+48], in[14:])
			})
		}
	}
}

// csumMode is one way the program keeps CHECKSUM_COMPLETE packets right.
type csumMode struct {
	name string
	flag bool
}

// csumModes are the ways this kernel supports: BPF_F_IPV6 where it has
// it, and always the compensation older kernels need.
func csumModes(t *testing.T) []csumMode {
	t.Helper()
	requireBuilt(t)
	requireRoot(t)
	modes := []csumMode{{"compensated", false}}
	ok, err := CsumIPv6Supported()
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		modes = append(modes, csumMode{"BPF_F_IPV6", true})
	} else {
		t.Logf("this kernel refuses BPF_F_IPV6: only the compensating mode runs")
	}
	return modes
}

// TestVerdicts covers traffic the program must leave alone or refuse,
// and the counter each refusal moves.
func TestVerdicts(t *testing.T) {
	objs := loaded(t)
	withNext := func(nh uint8, p []byte) []byte {
		p = bytes.Clone(p)
		p[14+6] = nh
		return p
	}
	udp := packet(protoUDP, client, vip, 40000, 53, []byte("x"))
	echo := icmpError(128, 0, 0, client, vip, nil, 0) // an echo request: not an error
	other := packet(protoTCP, client, backend, 40000, 8080, nil)
	stray := packet(protoTCP, backend, node, 8080, 31000, nil) // no such flow
	ack := tcpPacket(client, vip, 40001, 80, seg{flags: tcpACK, seq: 5, ack: 9}, nil)
	for _, tc := range []struct {
		name string
		in   []byte
		want int32
		stat uint32 // the counter that must move, for drops
	}{
		{"fragment to the VIP", withNext(44, udp), tcxDrop, StatFragment},
		{"hop-by-hop options to the VIP", withNext(0, udp), tcxDrop, StatExtensionHeader},
		{"routing header to the VIP", withNext(43, udp), tcxDrop, StatExtensionHeader},
		{"SCTP to the VIP", withNext(132, udp), tcxDrop, StatProtocol},
		{"ICMPv6 echo to the VIP", echo, tcxDrop, StatProtocol},
		{"unknown port on the VIP", packet(protoTCP, client, vip, 40000, 81, nil), tcxDrop, StatNoService},
		{"ACK without a flow", ack, tcxDrop, StatNoFlow},
		{"truncated TCP header to the VIP", packet(protoTCP, client, vip, 1, 80, nil)[:14+40+4], tcxDrop, StatTruncated},
		{"truncated ICMPv6 error to the VIP", icmpError(1, 4, 0, client, vip, nil, 0)[:14+40+6], tcxDrop, StatTruncated},
		{"traffic to a Pod", other, tcxNext, 0},
		{"reply without a flow", stray, tcxNext, 0},
		{"fragment to a Pod", withNext(44, other), tcxNext, 0},
		{"IPv4", append([]byte{12: 0x08, 13: 0x00}, make([]byte, 40)...), tcxNext, 0},
		{"truncated TCP header elsewhere", packet(protoTCP, client, backend, 1, 80, nil)[:14+40+4], tcxNext, 0},
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
			if ret == tcxNext && !bytes.Equal(out, tc.in) {
				t.Errorf("a packet passed on untouched was changed")
			}
			if tc.want == tcxDrop {
				if after := stat(t, objs, tc.stat); after != before+1 {
					t.Errorf("counter %d went from %d to %d, want one more", tc.stat, before, after)
				}
			}
		})
	}
}

// FuzzProgram feeds arbitrary IPv6 packets to the program: the verdict is
// always one of the three, and a packet passed on to the next program is
// never changed.
func FuzzProgram(f *testing.F) {
	f.Add(packet(protoTCP, client, vip, 40000, 80, nil)[14:])
	f.Add(packet(protoUDP, client, vip, 40000, 53, []byte("q"))[14:])
	f.Add(packet(protoUDP, backend, node, 5353, 31000, nil)[14:])
	f.Add(icmpError(2, 0, 1280, router, node, udpIP(node, backend, 31000, 5353, []byte("q")), 1232)[14:])
	f.Add(append([]byte{0x60, 0, 0, 0, 0, 0, 44, 64}, make([]byte, 32)...))
	objs := loaded(f)
	f.Fuzz(func(t *testing.T, ip []byte) {
		// The kernel's test runner refuses what the IPv6 layer would: less
		// than a full IPv6 header, more than a page.
		if len(ip) < 40 || len(ip) > 1500 {
			t.Skip()
		}
		in := append(make([]byte, 14), ip...)
		binary.BigEndian.PutUint16(in[12:], 0x86dd)
		ret, out := runProg(t, objs, in)
		switch ret {
		case tcxNext:
			if !bytes.Equal(out, in) {
				t.Fatal("a packet passed on untouched was changed")
			}
		case tcxPass, tcxDrop:
		default:
			t.Fatalf("verdict %d", ret)
		}
	})
}
