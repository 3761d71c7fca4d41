// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// The program's verdicts.
const (
	tcxNext = -1
	tcxPass = 0
	tcxDrop = 2
)

var (
	client  = netip.MustParseAddr("2001:db8:1:2::c")
	node    = netip.MustParseAddr("2001:db8:ff::1")
	backend = netip.MustParseAddr("2001:db8:1:2::b1")
	vip     = netip.MustParseAddr("fd50:6f64:6d69::1")
)

// words is an address in the maps' layout (raw bytes as native words).
func words(a netip.Addr) VipAddr {
	b := a.As16()
	var v VipAddr
	for i := range v.W {
		v.W[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return v
}

// be is a port in network byte order as the maps hold it.
func be(p uint16) uint16 {
	return binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, p))
}

// loaded loads the program with one Service: vip TCP 80 and UDP 53 to
// backend ports 8080 and 5353.
func loaded(t testing.TB) *VipObjects {
	t.Helper()
	requireBuilt(t)
	if os.Geteuid() != 0 {
		t.Skip("running eBPF programs needs root (CAP_BPF and CAP_NET_ADMIN); run the tests as root")
	}
	objs := new(VipObjects)
	if err := LoadVipObjects(objs, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { objs.Close() })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(objs.Config.Put(uint32(0), VipConfig{Node: words(node)}))
	must(objs.Vips.Put(words(vip), uint32(1)))
	for id, p := range []struct {
		proto         uint8
		port, backend uint16
	}{{6, 80, 8080}, {17, 53, 5353}} {
		must(objs.Services.Put(VipServiceKey{Vip: words(vip), Port: be(p.port), Proto: p.proto}, VipService{Id: uint32(id), Count: 1}))
		must(objs.Backends.Put(VipBackendKey{Service: uint32(id), Slot: 0}, VipBackend{Addr: words(backend), Port: be(p.backend)}))
	}
	return objs
}

// packet builds Ethernet + IPv6 + TCP (flags SYN) or UDP with a correct
// checksum.
func packet(proto uint8, src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	l4len := 8
	if proto == 6 {
		l4len = 20
	}
	p := make([]byte, 14+40+l4len+len(payload))
	binary.BigEndian.PutUint16(p[12:], 0x86dd)
	ip := p[14:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(l4len+len(payload)))
	ip[6] = proto
	ip[7] = 64
	s, d := src.As16(), dst.As16()
	copy(ip[8:], s[:])
	copy(ip[24:], d[:])
	l4 := ip[40:]
	binary.BigEndian.PutUint16(l4[0:], sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	if proto == 6 {
		l4[12] = 5 << 4
		l4[13] = 0x02 // SYN
		binary.BigEndian.PutUint16(l4[14:], 65535)
	} else {
		binary.BigEndian.PutUint16(l4[4:], uint16(l4len+len(payload)))
	}
	copy(l4[l4len:], payload)
	binary.BigEndian.PutUint16(l4[csumOff(proto):], l4sum(p))
	return p
}

func csumOff(proto uint8) int {
	if proto == 6 {
		return 16
	}
	return 6
}

// l4sum computes the IPv6 TCP/UDP checksum of p with its checksum field
// taken as zero.
func l4sum(p []byte) uint16 {
	ip := p[14:]
	l4 := bytes.Clone(ip[40:])
	proto := ip[6]
	l4[csumOff(proto)], l4[csumOff(proto)+1] = 0, 0
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(ip[8:40])
	sum += uint32(len(l4)) + uint32(proto)
	add(l4)
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	c := ^uint16(sum)
	if c == 0 && proto == 17 {
		c = 0xffff
	}
	return c
}

type tuple struct {
	src, dst     netip.Addr
	sport, dport uint16
}

func parse(p []byte) tuple {
	ip := p[14:]
	return tuple{
		src:   netip.AddrFrom16([16]byte(ip[8:24])),
		dst:   netip.AddrFrom16([16]byte(ip[24:40])),
		sport: binary.BigEndian.Uint16(ip[40:]),
		dport: binary.BigEndian.Uint16(ip[42:]),
	}
}

func runProg(t testing.TB, objs *VipObjects, in []byte) (int32, []byte) {
	t.Helper()
	out := make([]byte, len(in)+256)
	opts := &ebpf.RunOptions{Data: in, DataOut: out}
	ret, err := objs.PodminVip.Run(opts)
	if err != nil {
		t.Fatalf("run the program: %v", err)
	}
	return int32(ret), opts.DataOut
}

// TestRewriteChecksums runs crafted packets through the program in the
// kernel and checks the NAT rewrite and the recomputed checksums both
// ways, for TCP and UDP.
func TestRewriteChecksums(t *testing.T) {
	objs := loaded(t)
	for _, tc := range []struct {
		name        string
		proto       uint8
		vport, port uint16
	}{{"TCP", 6, 80, 8080}, {"UDP", 17, 53, 5353}} {
		t.Run(tc.name, func(t *testing.T) {
			in := packet(tc.proto, client, vip, 40000, tc.vport, []byte("hello, odd length"))
			ret, out := runProg(t, objs, in)
			if ret != tcxPass {
				t.Fatalf("verdict %d, want pass", ret)
			}
			got := parse(out)
			if got.src != node || got.dst != backend || got.dport != tc.port || got.sport < 30000 || got.sport > 32767 {
				t.Fatalf("forward rewrite gave %+v, want %v:30000-32767 -> %v:%d", got, node, backend, tc.port)
			}
			if sum := binary.BigEndian.Uint16(out[14+40+csumOff(tc.proto):]); sum != l4sum(out) {
				t.Errorf("forward checksum %#04x, want %#04x", sum, l4sum(out))
			}

			// The backend's answer comes back to the NAT port.
			reply := packet(tc.proto, backend, node, tc.port, got.sport, []byte("hi"))
			if tc.proto == 6 {
				reply[14+40+13] = 0x12 // SYN-ACK
				binary.BigEndian.PutUint16(reply[14+40+16:], 0)
				binary.BigEndian.PutUint16(reply[14+40+16:], l4sum(reply))
			}
			ret, back := runProg(t, objs, reply)
			if ret != tcxPass {
				t.Fatalf("reply verdict %d, want pass", ret)
			}
			want := tuple{vip, client, tc.vport, 40000}
			if g := parse(back); g != want {
				t.Fatalf("reverse rewrite gave %+v, want %+v", g, want)
			}
			if sum := binary.BigEndian.Uint16(back[14+40+csumOff(tc.proto):]); sum != l4sum(back) {
				t.Errorf("reverse checksum %#04x, want %#04x", sum, l4sum(back))
			}
		})
	}
}

// TestVerdicts covers traffic the program must leave alone or refuse.
func TestVerdicts(t *testing.T) {
	objs := loaded(t)
	frag := packet(17, client, vip, 40000, 53, []byte("x"))
	frag[14+6] = 44 // a fragment header follows
	ping := packet(17, client, vip, 40000, 53, []byte("x"))
	ping[14+6] = 58 // ICMPv6
	other := packet(6, client, backend, 40000, 8080, nil)
	stray := packet(6, backend, node, 8080, 31000, nil) // no such flow
	ack := packet(6, client, vip, 40001, 80, nil)
	ack[14+40+13] = 0x10 // a bare ACK starts no flow
	for _, tc := range []struct {
		name string
		in   []byte
		want int32
	}{
		{"fragment to the VIP", frag, tcxDrop},
		{"ICMPv6 to the VIP", ping, tcxDrop},
		{"unknown port on the VIP", packet(6, client, vip, 40000, 81, nil), tcxDrop},
		{"ACK without a flow", ack, tcxDrop},
		{"traffic to a Pod", other, tcxNext},
		{"reply without a flow", stray, tcxNext},
		{"IPv4", append([]byte{12: 0x08, 13: 0x00}, make([]byte, 40)...), tcxNext},
		{"truncated TCP header to the VIP", packet(6, client, vip, 1, 80, nil)[:14+40+4], tcxDrop},
		{"truncated TCP header elsewhere", packet(6, client, backend, 1, 80, nil)[:14+40+4], tcxNext},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ret, out := runProg(t, objs, tc.in)
			if ret != tc.want {
				t.Fatalf("verdict %d, want %d", ret, tc.want)
			}
			if ret == tcxNext && !bytes.Equal(out, tc.in) {
				t.Errorf("a packet passed on untouched was changed")
			}
		})
	}
}

// FuzzProgram feeds arbitrary IPv6 packets to the program: the verdict is
// always one of the three, and a packet passed on to the next program is
// never changed.
func FuzzProgram(f *testing.F) {
	f.Add(packet(6, client, vip, 40000, 80, nil)[14:])
	f.Add(packet(17, client, vip, 40000, 53, []byte("q"))[14:])
	f.Add(packet(17, backend, node, 5353, 31000, nil)[14:])
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
