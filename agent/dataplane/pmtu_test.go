// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var (
	remote     = netip.MustParseAddr("2001:db8:9::b3")
	routerAddr = netip.MustParseAddr("2001:db8:ff::fe")
)

// behindRouter puts a backend (address remote) behind a router: the
// router hangs off the node's up0, which becomes the node's default route
// (so the program is attached there), and the router's link to the
// backend has MTU mtu on the router's side, 1500 on the backend's. It
// returns the backend's namespace.
func (tp *topology) behindRouter(tb testing.TB, mtu int) string {
	tb.Helper()
	r, b := tp.client+"r", tp.client+"b3"
	for _, ns := range []string{r, b} {
		_ = exec.Command("ip", "netns", "del", ns).Run()
		run(tb, "ip", "netns", "add", ns)
		tb.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		for _, s := range []string{"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"} {
			run(tb, "ip", "netns", "exec", ns, "sysctl", "-qw", s)
		}
		run(tb, "ip", "-n", ns, "link", "set", "lo", "up")
	}
	run(tb, "ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	// node up0 <-> router eth0
	run(tb, "ip", "link", "add", "up0", "netns", tp.node, "type", "veth", "peer", "name", "eth0", "netns", r)
	run(tb, "ip", "-n", tp.node, "link", "set", "up0", "up")
	run(tb, "ip", "-n", tp.node, "addr", "add", "fe80::1/64", "dev", "up0", "nodad")
	run(tb, "ip", "-n", tp.node, "-6", "route", "add", "default", "via", "fe80::2", "dev", "up0", "metric", "100")
	run(tb, "ip", "-n", r, "link", "set", "eth0", "up")
	run(tb, "ip", "-n", r, "addr", "add", "fe80::2/64", "dev", "eth0", "nodad")
	run(tb, "ip", "-n", r, "addr", "add", routerAddr.String()+"/128", "dev", "lo")
	run(tb, "ip", "-n", r, "-6", "route", "add", "default", "via", "fe80::1", "dev", "eth0")
	// router eth1 (MTU mtu) <-> backend eth0 (1500)
	run(tb, "ip", "link", "add", "eth1", "netns", r, "type", "veth", "peer", "name", "eth0", "netns", b)
	run(tb, "ip", "-n", r, "link", "set", "eth1", "mtu", strconv.Itoa(mtu), "up")
	run(tb, "ip", "-n", r, "addr", "add", "fe80::1/64", "dev", "eth1", "nodad")
	run(tb, "ip", "-n", r, "-6", "route", "add", remote.String()+"/128", "dev", "eth1")
	run(tb, "ip", "-n", b, "link", "set", "eth0", "up")
	run(tb, "ip", "-n", b, "addr", "add", remote.String()+"/128", "dev", "eth0", "nodad")
	run(tb, "ip", "-n", b, "-6", "route", "add", "default", "via", "fe80::1", "dev", "eth0")
	return b
}

// upload sends size bytes from the client to the sink at to and waits
// for its answer, at most timeout.
func (tp *topology) upload(tb testing.TB, to netip.AddrPort, size int, timeout time.Duration) (took time.Duration, err error) {
	tb.Helper()
	tp.in(tb, tp.client, func() error {
		start := time.Now()
		c, derr := net.DialTimeout("tcp6", to.String(), 3*time.Second)
		if derr != nil {
			err = derr
			return nil
		}
		defer c.Close()
		if err = c.SetDeadline(start.Add(timeout)); err != nil {
			return nil
		}
		if _, err = c.Write(make([]byte, size)); err != nil {
			return nil
		}
		if err = c.(*net.TCPConn).CloseWrite(); err != nil {
			return nil
		}
		ok, rerr := io.ReadAll(c)
		if rerr == nil && string(ok) != "ok" {
			rerr = fmt.Errorf("the sink answered %q", ok)
		}
		err = rerr
		took = time.Since(start)
		return nil
	})
	return took, err
}

// TestPathMTU uploads through a 1280-byte hop, with endpoints whose own
// links are 1500 bytes, so that only path MTU discovery saves the
// transfer: the hop's Packet Too Big errors are addressed to the node
// (the NATed source) and must reach the client. The hop is the node's own
// link to the backend (the node raises the error, which loops back), or a
// router's link beyond the node. The direct upload's time is logged;
// BenchmarkPathMTU compares the paths.
func TestPathMTU(t *testing.T) {
	const size = 4 << 20
	for _, tc := range []struct {
		name, tag string
		hop       func(f *fixture) netip.Addr // builds the hop, returns the backend
	}{
		{"the node's link to the backend", "m", func(f *fixture) netip.Addr {
			run(t, "ip", "-n", f.node, "link", "set", "hb1", "mtu", "1280")
			return backend1
		}},
		{"a router's link beyond the node", "n", func(f *fixture) netip.Addr {
			f.serve(t, f.behindRouter(t, 1280), "remote")
			return remote
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.tag)
			b := tc.hop(f)
			f.apply(t, service(b))
			// Small uploads, which need no path MTU discovery, resolve the
			// neighbours on the way, so that the timed uploads compare the
			// paths alone.
			for _, to := range []netip.Addr{vip, b} {
				if _, err := f.upload(t, netip.AddrPortFrom(to, sinkPort), 1024, 20*time.Second); err != nil {
					t.Fatalf("small upload to %v: %v", to, err)
				}
			}
			vipTook, err := f.upload(t, netip.AddrPortFrom(vip, sinkPort), size, 20*time.Second)
			if err != nil {
				t.Fatalf("upload through the VIP: %v", err)
			}
			directTook, err := f.upload(t, netip.AddrPortFrom(b, sinkPort), size, 20*time.Second)
			if err != nil {
				t.Fatalf("direct upload: %v", err)
			}
			if s := f.stats(t); s.ICMPTranslated == 0 {
				t.Errorf("no ICMPv6 error was translated: %+v", s)
			}
			t.Logf("one upload of %d MiB each: through the VIP in %v, direct in %v (single samples: BenchmarkPathMTU compares the paths)",
				size>>20, vipTook, directTook)
		})
	}
}

// errQueue returns the next error the kernel queued on c (IPV6_RECVERR):
// the extended error and the address that reported it.
func errQueue(t *testing.T, c syscallConn, timeout time.Duration) (unix.SockExtendedErr, netip.Addr) {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(timeout)
	for {
		var ee unix.SockExtendedErr
		var from netip.Addr
		var rerr error
		found := false
		if err := raw.Control(func(fd uintptr) {
			buf, oob := make([]byte, 2048), make([]byte, 512)
			_, oobn, _, _, err := unix.Recvmsg(int(fd), buf, oob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
			if err != nil {
				if !errors.Is(err, unix.EAGAIN) {
					rerr = err
				}
				return
			}
			msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
			if err != nil {
				rerr = err
				return
			}
			for _, m := range msgs {
				if m.Header.Level != unix.SOL_IPV6 || m.Header.Type != unix.IPV6_RECVERR {
					continue
				}
				const eeSize = int(unsafe.Sizeof(unix.SockExtendedErr{}))
				if len(m.Data) < eeSize+int(unsafe.Sizeof(unix.RawSockaddrInet6{})) {
					continue
				}
				ee = *(*unix.SockExtendedErr)(unsafe.Pointer(&m.Data[0]))
				sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(&m.Data[eeSize]))
				from = netip.AddrFrom16(sa.Addr)
				found = true
			}
		}); err != nil {
			t.Fatal(err)
		}
		if rerr != nil {
			t.Fatalf("read the socket's error queue: %v", rerr)
		}
		if found {
			return ee, from
		}
		if time.Now().After(deadline) {
			t.Fatalf("no error arrived within %v", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type syscallConn interface {
	SyscallConn() (syscall.RawConn, error)
}

// setsockopt sets an integer IPv6 socket option on c.
func setsockopt(t *testing.T, c syscallConn, opt, v int) {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, opt, v) }); err != nil || serr != nil {
		t.Fatalf("set IPv6 socket option %d: %v %v", opt, err, serr)
	}
}

// TestICMPv6Errors has the kernel raise real ICMPv6 errors about packets
// through the VIP, and reads them from the error queue of the socket that
// sent the packet (IPV6_RECVERR): Packet Too Big from the node's own
// 1280-byte link, destination (port) unreachable from the backend, hop
// limit exceeded from the node, and, the other way, port unreachable from
// the client about a backend's reply, which the backend gets.
func TestICMPv6Errors(t *testing.T) {
	f := newFixture(t, "k")
	vip2 := netip.MustParseAddr("fd50:6f64:6d69::2")
	const closedPort, recvErrPort = 5999, 5998
	var backendSock *net.UDPConn
	f.in(t, f.b1, func() (err error) {
		backendSock, err = net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6unspecified, Port: recvErrPort})
		return err
	})
	t.Cleanup(func() { backendSock.Close() })
	setsockopt(t, backendSock, unix.IPV6_RECVERR, 1)
	run(t, "ip", "-n", f.node, "link", "set", "hb1", "mtu", "1280")
	f.apply(t, service(backend1), Service{
		Namespace: "product", Name: "errors", VIP: vip2, Backends: []netip.Addr{backend1},
		Ports: []Port{{Protocol: UDP, Port: 54, TargetPort: closedPort}, {Protocol: UDP, Port: 55, TargetPort: recvErrPort}},
	})
	dial := func(t *testing.T, to netip.AddrPort) *net.UDPConn {
		t.Helper()
		var c *net.UDPConn
		f.in(t, f.client, func() (err error) {
			c, err = net.DialUDP("udp6", nil, net.UDPAddrFromAddrPort(to))
			return err
		})
		t.Cleanup(func() { c.Close() })
		setsockopt(t, c, unix.IPV6_RECVERR, 1)
		return c
	}
	for _, tc := range []struct {
		name       string
		to         netip.AddrPort
		size, hops int
		typ, code  uint8
		info       uint32
		from       netip.Addr
		errno      unix.Errno
	}{
		{"packet too big", netip.AddrPortFrom(vip, dnsPort), 1400, 0, 2, 0, 1280, nodeIP, unix.EMSGSIZE},
		{"port unreachable", netip.AddrPortFrom(vip2, 54), 10, 0, 1, 4, 0, vip2, unix.ECONNREFUSED},
		{"hop limit exceeded", netip.AddrPortFrom(vip, dnsPort), 10, 1, 3, 0, 0, nodeIP, unix.EHOSTUNREACH},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, tc.to)
			setsockopt(t, c, unix.IPV6_MTU_DISCOVER, unix.IPV6_PMTUDISC_DO)
			if tc.hops > 0 {
				setsockopt(t, c, unix.IPV6_UNICAST_HOPS, tc.hops)
			}
			if _, err := c.Write(make([]byte, tc.size)); err != nil {
				t.Fatal(err)
			}
			ee, from := errQueue(t, c, 5*time.Second)
			if ee.Origin != unix.SO_EE_ORIGIN_ICMP6 || ee.Type != tc.typ || ee.Code != tc.code || ee.Info != tc.info || unix.Errno(ee.Errno) != tc.errno || from != tc.from {
				t.Errorf("error %+v from %v; want ICMPv6 type %d code %d info %d (%v) from %v", ee, from, tc.typ, tc.code, tc.info, tc.errno, tc.from)
			}
		})
	}

	t.Run("port unreachable, to the backend", func(t *testing.T) {
		c := dial(t, netip.AddrPortFrom(vip2, 55))
		if _, err := c.Write([]byte("q")); err != nil {
			t.Fatal(err)
		}
		if err := backendSock.SetReadDeadline(time.Now().Add(3 * time.Second)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 16)
		_, peer, err := backendSock.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		c.Close() // the reply now finds no socket
		if _, err := backendSock.WriteToUDPAddrPort([]byte("a"), peer); err != nil {
			t.Fatal(err)
		}
		ee, from := errQueue(t, backendSock, 5*time.Second)
		if ee.Origin != unix.SO_EE_ORIGIN_ICMP6 || ee.Type != 1 || ee.Code != 4 || from != nodeIP {
			t.Errorf("the backend got %+v from %v; want port unreachable from the node %v", ee, from, nodeIP)
		}
	})
	if s := f.stats(t); s.ICMPTranslated < 4 {
		t.Errorf("%d ICMPv6 errors translated, want at least 4", s.ICMPTranslated)
	}
}

// BenchmarkPathMTU uploads 8 MiB at a time through a router's 1280-byte
// link, alternating the VIP and the direct path and forgetting the
// client's learned path MTUs before each upload, so that every transfer
// discovers it again; it reports both rates and their ratio:
//
//	go test ./agent/dataplane -run '^$' -bench PathMTU -benchtime 20x
func BenchmarkPathMTU(b *testing.B) {
	requireRoot(b)
	tp := newTopology(b, "P")
	tp.serve(b, tp.behindRouter(b, 1280), "remote")
	dp, err := New(Config{NodeAddr: nodeIP, PodPrefix: podPrefix, NetNS: tp.nsPath(tp.node)})
	if err != nil {
		b.Fatal(err)
	}
	renew(b, dp)
	b.Cleanup(func() { _ = dp.Stop() })
	if err := dp.Apply(b.Context(), []Service{service(remote)}); err != nil {
		b.Fatal(err)
	}
	const size = 8 << 20
	targets := [2]netip.AddrPort{netip.AddrPortFrom(remote, sinkPort), netip.AddrPortFrom(vip, sinkPort)}
	var took [2]time.Duration
	var ratios []float64 // per round, VIP rate / direct rate
	round := 0
	for b.Loop() {
		var d [2]time.Duration
		for _, i := range [2]int{round % 2, 1 - round%2} {
			run(b, "ip", "-n", tp.client, "-6", "route", "flush", "cache")
			var err error
			if d[i], err = tp.upload(b, targets[i], size, 20*time.Second); err != nil {
				b.Fatalf("upload to %v: %v", targets[i], err)
			}
			took[i] += d[i]
		}
		ratios = append(ratios, d[0].Seconds()/d[1].Seconds())
		round++
	}
	mbps := func(i int) float64 { return float64(size*b.N) / took[i].Seconds() / 1e6 }
	b.ReportMetric(mbps(0), "direct-MB/s")
	b.ReportMetric(mbps(1), "vip-MB/s")
	b.ReportMetric(mbps(1)/mbps(0), "ratio")
	// A busy machine stalls single uploads now and then; the median round
	// is what the paths themselves cost.
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "median-ratio")
}
