// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/bpf"
)

// The test topology: a client Pod, a node and two backend Pods, each in
// its own network namespace, joined by veths like Podmin's ptp CNI does
// (a /128 route per Pod on the host side, a default route to fe80::1 in
// the Pod).
var (
	podPrefix = netip.MustParsePrefix("2001:db8:1:2::/80")
	clientIP  = netip.MustParseAddr("2001:db8:1:2::c")
	backend1  = netip.MustParseAddr("2001:db8:1:2::b1")
	backend2  = netip.MustParseAddr("2001:db8:1:2::b2")
	nodeIP    = netip.MustParseAddr("2001:db8:ff::1")
	vip       = netip.MustParseAddr("fd50:6f64:6d69:0:1234:5678:9abc:def0")
)

// Backend server ports.
const (
	linePort    = 8080 // TCP: answers every line with "<name> <client address>"; closes on "bye"
	sinkPort    = 9000 // TCP: discards until EOF, then answers "ok"
	pingPort    = 9001 // TCP: echoes one byte, then waits for EOF
	ackPort     = 9002 // TCP: discards, answering one byte per MiB received
	closerPort  = 9003 // TCP: writes one byte and closes first
	helloPort   = 9004 // TCP: writes "<name> <client address>" and closes first
	udpPort     = 5353 // UDP: answers every datagram with "<name> <client address>"
	udpSinkPort = 5354 // UDP: counts the bytes it receives, answers "?" with the count
	servicePort = 80
	dnsPort     = 53
)

type topology struct {
	client, node, b1, b2 string // namespace names
}

func (tp *topology) nsPath(ns string) string { return filepath.Join("/var/run/netns", ns) }

// requireRoot skips tests that need kernel eBPF and network namespaces.
func requireRoot(tb testing.TB) {
	tb.Helper()
	if err := bpf.Built(); err != nil {
		tb.Skip(err.Error())
	}
	if os.Geteuid() != 0 {
		tb.Skip("needs root for eBPF (CAP_BPF, CAP_NET_ADMIN) and network namespaces; run the tests as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		tb.Skip("needs the ip command from iproute2 to build network namespaces: apt-get install -y iproute2")
	}
}

func run(tb testing.TB, args ...string) {
	tb.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		tb.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newTopology builds the namespaces, named after this process so that
// packages testing in parallel do not collide, and removes them at the
// end of the test.
func newTopology(tb testing.TB, tag string) *topology {
	tb.Helper()
	requireRoot(tb)
	p := fmt.Sprintf("pdp%d%s", os.Getpid(), tag)
	tp := &topology{client: p + "c", node: p + "n", b1: p + "b1", b2: p + "b2"}
	for _, ns := range []string{tp.client, tp.node, tp.b1, tp.b2} {
		_ = exec.Command("ip", "netns", "del", ns).Run()
		run(tb, "ip", "netns", "add", ns)
		tb.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		for _, s := range []string{"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0", "net.ipv4.tcp_tw_reuse=1"} {
			run(tb, "ip", "netns", "exec", ns, "sysctl", "-qw", s)
		}
		run(tb, "ip", "-n", ns, "link", "set", "lo", "up")
	}
	run(tb, "ip", "netns", "exec", tp.node, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	run(tb, "ip", "-n", tp.node, "addr", "add", nodeIP.String()+"/128", "dev", "lo")
	tp.pod(tb, tp.client, "hc", clientIP)
	tp.pod(tb, tp.b1, "hb1", backend1)
	tp.pod(tb, tp.b2, "hb2", backend2)
	return tp
}

// pod joins ns to the node with a veth whose node side is host.
func (tp *topology) pod(tb testing.TB, ns, host string, ip netip.Addr) {
	tb.Helper()
	run(tb, "ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", host, "netns", tp.node)
	run(tb, "ip", "-n", ns, "link", "set", "eth0", "up")
	run(tb, "ip", "-n", tp.node, "link", "set", host, "up")
	run(tb, "ip", "-n", ns, "addr", "add", ip.String()+"/128", "dev", "eth0", "nodad")
	run(tb, "ip", "-n", tp.node, "addr", "add", "fe80::1/64", "dev", host, "nodad")
	run(tb, "ip", "-n", ns, "-6", "route", "add", "default", "via", "fe80::1", "dev", "eth0")
	run(tb, "ip", "-n", tp.node, "-6", "route", "add", ip.String()+"/128", "dev", host)
}

// in runs fn inside namespace ns; sockets made there stay there.
func (tp *topology) in(tb testing.TB, ns string, fn func() error) {
	tb.Helper()
	if err := inNetNS(tp.nsPath(ns), fn); err != nil {
		tb.Fatal(err)
	}
}

// serve starts the backend servers in a backend namespace.
func (tp *topology) serve(tb testing.TB, ns, name string) {
	tb.Helper()
	var lines, sink, ping, acks, closer, hello net.Listener
	var udp, udpSink net.PacketConn
	tp.in(tb, ns, func() (err error) {
		if lines, err = net.Listen("tcp6", fmt.Sprintf("[::]:%d", linePort)); err != nil {
			return err
		}
		if sink, err = net.Listen("tcp6", fmt.Sprintf("[::]:%d", sinkPort)); err != nil {
			return err
		}
		if ping, err = net.Listen("tcp6", fmt.Sprintf("[::]:%d", pingPort)); err != nil {
			return err
		}
		if acks, err = net.Listen("tcp6", fmt.Sprintf("[::]:%d", ackPort)); err != nil {
			return err
		}
		if closer, err = net.Listen("tcp6", fmt.Sprintf("[::]:%d", closerPort)); err != nil {
			return err
		}
		if hello, err = net.Listen("tcp6", fmt.Sprintf("[::]:%d", helloPort)); err != nil {
			return err
		}
		if udp, err = net.ListenPacket("udp6", fmt.Sprintf("[::]:%d", udpPort)); err != nil {
			return err
		}
		udpSink, err = net.ListenPacket("udp6", fmt.Sprintf("[::]:%d", udpSinkPort))
		return err
	})
	var wg sync.WaitGroup
	tb.Cleanup(func() {
		lines.Close()
		sink.Close()
		ping.Close()
		acks.Close()
		closer.Close()
		hello.Close()
		udp.Close()
		udpSink.Close()
		wg.Wait()
	})
	accept := func(l net.Listener, handle func(net.Conn)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var conns sync.WaitGroup
			defer conns.Wait()
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				conns.Add(1)
				go func() {
					defer conns.Done()
					defer c.Close()
					stop := context.AfterFunc(tb.Context(), func() { c.Close() })
					defer stop()
					handle(c)
				}()
			}
		}()
	}
	accept(lines, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil || line == "bye\n" {
				return
			}
			if _, err := fmt.Fprintf(c, "%s %s\n", name, c.RemoteAddr()); err != nil {
				return
			}
		}
	})
	accept(sink, func(c net.Conn) {
		if _, err := io.Copy(io.Discard, c); err == nil {
			_, _ = c.Write([]byte("ok"))
		}
	})
	accept(ping, func(c net.Conn) {
		var b [1]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return
		}
		if _, err := c.Write(b[:]); err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, c)
	})
	accept(acks, func(c net.Conn) {
		buf := make([]byte, 256<<10)
		total := 0
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			for total += n; total >= 1<<20; total -= 1 << 20 {
				if _, err := c.Write([]byte{'a'}); err != nil {
					return
				}
			}
		}
	})
	accept(closer, func(c net.Conn) {
		_, _ = c.Write([]byte{'x'})
	})
	accept(hello, func(c net.Conn) {
		_, _ = fmt.Fprintf(c, "%s %s\n", name, c.RemoteAddr())
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		total := 0
		for {
			n, from, err := udpSink.ReadFrom(buf)
			if err != nil {
				return
			}
			if n == 1 && buf[0] == '?' {
				_, _ = udpSink.WriteTo(strconv.AppendInt(nil, int64(total), 10), from)
				continue
			}
			total += n
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		for {
			n, from, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			_ = n
			_, _ = udp.WriteTo(fmt.Appendf(nil, "%s %s", name, from), from)
		}
	}()
}

// dial opens a TCP connection from the client namespace.
func (tp *topology) dial(tb testing.TB, to netip.AddrPort, timeout time.Duration) (net.Conn, error) {
	tb.Helper()
	var c net.Conn
	err := inNetNS(tp.nsPath(tp.client), func() (err error) {
		c, err = net.DialTimeout("tcp6", to.String(), timeout)
		return err
	})
	return c, err
}

// udpSocket opens an unconnected UDP socket in the client namespace, so
// replies from any source are seen with their real source.
func (tp *topology) udpSocket(tb testing.TB) *net.UDPConn {
	tb.Helper()
	var c *net.UDPConn
	tp.in(tb, tp.client, func() (err error) {
		c, err = net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6unspecified})
		return err
	})
	tb.Cleanup(func() { c.Close() })
	return c
}

// reply is what a backend answered: its name and the source it saw.
type reply struct {
	backend string
	from    netip.AddrPort
}

func parseReply(s string) (reply, error) {
	name, from, ok := strings.Cut(strings.TrimSpace(s), " ")
	if !ok {
		return reply{}, fmt.Errorf("malformed reply %q", s)
	}
	ap, err := netip.ParseAddrPort(from)
	if err != nil {
		return reply{}, fmt.Errorf("malformed reply %q: %w", s, err)
	}
	return reply{name, ap}, nil
}

// ask sends one line on c and parses the answer.
func ask(c net.Conn) (reply, error) {
	if err := c.SetDeadline(time.Now().Add(3 * time.Second)); err != nil {
		return reply{}, err
	}
	if _, err := io.WriteString(c, "who\n"); err != nil {
		return reply{}, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return reply{}, err
	}
	return parseReply(line)
}

// askUDP sends one datagram to to and returns the answer and its source.
func askUDP(c *net.UDPConn, to netip.AddrPort, payload []byte, timeout time.Duration) (reply, netip.AddrPort, error) {
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return reply{}, netip.AddrPort{}, err
	}
	if _, err := c.WriteToUDPAddrPort(payload, to); err != nil {
		return reply{}, netip.AddrPort{}, err
	}
	buf := make([]byte, 2048)
	n, from, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		return reply{}, netip.AddrPort{}, err
	}
	r, err := parseReply(string(buf[:n]))
	return r, netip.AddrPortFrom(from.Addr().Unmap(), from.Port()), err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
