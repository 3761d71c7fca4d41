// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// The program's verdicts.
const (
	tcxNext     = -1
	tcxPass     = 0
	tcxDrop     = 2
	tcxRedirect = 7
)

// Protocol numbers.
const (
	protoTCP    = 6
	protoUDP    = 17
	protoICMPv6 = 58
)

// TCP flags.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

var (
	client  = netip.MustParseAddr("2001:db8:1:2::c")
	node    = netip.MustParseAddr("2001:db8:ff::1")
	backend = netip.MustParseAddr("2001:db8:1:2::b1")
	vip     = netip.MustParseAddr("fd50:6f64:6d69::1")
	router  = netip.MustParseAddr("2001:db8:ff::fe")
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

// loadFor loads the program with o (Limits defaulted) and one Service:
// vip TCP 80 and UDP 53 to backend ports 8080 and 5353.
func loadFor(t testing.TB, o LoadOptions) *VipObjects {
	t.Helper()
	requireBuilt(t)
	requireRoot(t)
	if o.Limits == (Limits{}) {
		o.Limits = DefaultLimits
	}
	objs, err := Load(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { objs.Close() })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// A lease that never lapses: lease_test.go covers a lapsed one.
	must(objs.Config.Put(uint32(0), VipConfig{Node: words(node), Lease: ^uint64(0)}))
	must(objs.Vips.Put(words(vip), uint32(1)))
	for id, p := range []struct {
		proto         uint8
		port, backend uint16
	}{{protoTCP, 80, 8080}, {protoUDP, 53, 5353}} {
		must(objs.Services.Put(VipServiceKey{Vip: words(vip), Port: be(p.port), Proto: p.proto}, VipService{Id: uint32(id), Count: 1}))
		must(objs.Backends.Put(VipBackendKey{Service: uint32(id), Slot: 0}, VipBackend{Addr: words(backend), Port: be(p.backend)}))
	}
	return objs
}

// loaded loads the program as the dataplane does on this kernel.
func loaded(t testing.TB) *VipObjects {
	t.Helper()
	requireBuilt(t)
	requireRoot(t)
	ok, err := CsumIPv6Supported()
	if err != nil {
		t.Fatal(err)
	}
	return loadFor(t, LoadOptions{CsumIPv6: ok})
}

// seg is a TCP segment's header fields.
type seg struct {
	flags    byte
	seq, ack uint32
	tsval    uint32 // with a timestamp option when not zero
}

// ipv6 builds an IPv6 packet (no Ethernet header) around l4, whose
// checksum at csumOff it computes.
func ipv6(proto uint8, src, dst netip.Addr, l4 []byte, csumOff int) []byte {
	ip := make([]byte, 40, 40+len(l4))
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
	ip[6] = proto
	ip[7] = 64
	s, d := src.As16(), dst.As16()
	copy(ip[8:], s[:])
	copy(ip[24:], d[:])
	ip = append(ip, l4...)
	binary.BigEndian.PutUint16(ip[40+csumOff:], l4sum(ip))
	return ip
}

// ether puts an Ethernet header for IPv6 in front of ip.
func ether(ip []byte) []byte {
	p := make([]byte, 14, 14+len(ip))
	binary.BigEndian.PutUint16(p[12:], 0x86dd)
	return append(p, ip...)
}

func tcpIP(src, dst netip.Addr, sport, dport uint16, s seg, payload []byte) []byte {
	hl := 20
	if s.tsval != 0 {
		hl += 12
	}
	l4 := make([]byte, hl, hl+len(payload))
	binary.BigEndian.PutUint16(l4[0:], sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	binary.BigEndian.PutUint32(l4[4:], s.seq)
	binary.BigEndian.PutUint32(l4[8:], s.ack)
	l4[12] = byte(hl/4) << 4
	l4[13] = s.flags
	binary.BigEndian.PutUint16(l4[14:], 65535)
	if s.tsval != 0 {
		copy(l4[20:], []byte{1, 1, 8, 10}) // NOP NOP TS
		binary.BigEndian.PutUint32(l4[24:], s.tsval)
	}
	return ipv6(protoTCP, src, dst, append(l4, payload...), 16)
}

func udpIP(src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	l4 := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(l4[0:], sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	binary.BigEndian.PutUint16(l4[4:], uint16(8+len(payload)))
	return ipv6(protoUDP, src, dst, append(l4, payload...), 6)
}

func tcpPacket(src, dst netip.Addr, sport, dport uint16, s seg, payload []byte) []byte {
	return ether(tcpIP(src, dst, sport, dport, s, payload))
}

// packet builds Ethernet + IPv6 + TCP (a SYN) or UDP with a correct
// checksum.
func packet(proto uint8, src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	if proto == protoTCP {
		return tcpPacket(src, dst, sport, dport, seg{flags: tcpSYN, seq: 1}, payload)
	}
	return ether(udpIP(src, dst, sport, dport, payload))
}

// icmpError builds an ICMPv6 error of type and code with info (the MTU of
// a Packet Too Big) about the IPv6 packet about, cut to keep bytes.
func icmpError(typ, code uint8, info uint32, src, dst netip.Addr, about []byte, keep int) []byte {
	l4 := make([]byte, 8)
	l4[0], l4[1] = typ, code
	binary.BigEndian.PutUint32(l4[4:], info)
	return ether(ipv6(protoICMPv6, src, dst, append(l4, about[:min(keep, len(about))]...), 2))
}

func csumOff(proto uint8) int {
	switch proto {
	case protoTCP:
		return 16
	case protoUDP:
		return 6
	}
	return 2
}

// l4sum computes the TCP, UDP or ICMPv6 checksum of the IPv6 packet ip
// (no Ethernet header) with its checksum field taken as zero.
func l4sum(ip []byte) uint16 {
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
	if c == 0 && proto == protoUDP {
		c = 0xffff
	}
	return c
}

// checksumOK reports whether the IPv6 packet ip carries a correct L4
// checksum.
func checksumOK(ip []byte) bool {
	return binary.BigEndian.Uint16(ip[40+csumOff(ip[6]):]) == l4sum(ip)
}

type tuple struct {
	src, dst     netip.Addr
	sport, dport uint16
}

// tupleOf reads the addresses and ports of the IPv6 packet ip.
func tupleOf(ip []byte) tuple {
	return tuple{
		src:   netip.AddrFrom16([16]byte(ip[8:24])),
		dst:   netip.AddrFrom16([16]byte(ip[24:40])),
		sport: binary.BigEndian.Uint16(ip[40:]),
		dport: binary.BigEndian.Uint16(ip[42:]),
	}
}

// parse reads the tuple of an Ethernet frame.
func parse(p []byte) tuple { return tupleOf(p[14:]) }

// skbContext is the start of struct __sk_buff, as far as a test run may
// set it.
type skbContext struct {
	Len, PktType, Mark, QueueMapping, Protocol, VlanPresent, VlanTCI, VlanProto, Priority uint32
	IngressIfindex, Ifindex                                                               uint32
}

// BPF_F_TEST_SKB_CHECKSUM_COMPLETE: the kernel gives the test packet
// CHECKSUM_COMPLETE and fails the run with EBADMSG when the program leaves
// skb->csum inconsistent with the packet.
const testChecksumComplete = 1 << 2

// device is the index of an interface other than loopback: a test run on
// loopback is the program's path for errors the node itself raises.
func device(t testing.TB) uint32 {
	t.Helper()
	ifcs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifcs {
		if ifc.Flags&net.FlagLoopback == 0 {
			return uint32(ifc.Index)
		}
	}
	t.Fatal("the test runs the program as if on a network interface, and this network namespace has none but loopback")
	return 0
}

// run runs the program on the Ethernet frame in as if it arrived on the
// interface ifindex, with checksum-complete when complete.
func run(t testing.TB, objs *VipObjects, in []byte, ifindex uint32, complete bool) (int32, []byte, error) {
	t.Helper()
	out := make([]byte, len(in)+256)
	opts := &ebpf.RunOptions{Data: in, DataOut: out, Context: skbContext{IngressIfindex: ifindex, Ifindex: ifindex}}
	if complete {
		opts.Flags = testChecksumComplete
	}
	ret, err := objs.PodminVip.Run(opts)
	return int32(ret), opts.DataOut, err
}

// runProg runs the program on in as if it arrived on a network interface
// and fails the test if the kernel cannot run it.
func runProg(t testing.TB, objs *VipObjects, in []byte) (int32, []byte) {
	t.Helper()
	ret, out, err := run(t, objs, in, device(t), false)
	if err != nil {
		t.Fatalf("run the program: %v", err)
	}
	return ret, out
}

// stat sums a counter over CPUs.
func stat(t testing.TB, objs *VipObjects, slot uint32) uint64 {
	t.Helper()
	var per []uint64
	if err := objs.Stats.Lookup(slot, &per); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n
}

// monotonic is the clock bpf_ktime_get_ns reads.
func monotonic(t testing.TB) uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano())
}

func isBadMsg(err error) bool { return errors.Is(err, unix.EBADMSG) }

// requireRoot skips a test that runs eBPF programs without root.
func requireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("running eBPF programs needs root (CAP_BPF and CAP_NET_ADMIN); run the tests as root")
	}
}
