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
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A rollout replaces a backend's Pod with one at a new address. These
// tests run one through the topology and then open connections on client
// tuples that earlier connections used, as clients do: Linux gives a
// client's connections to one VIP port the source ports of one sequence
// per source and destination, which wraps after about 3,100 connections
// with the default port range and carries on across processes and
// network namespaces.
var (
	backend3 = netip.MustParseAddr("2001:db8:1:2::b3")
	vip2     = netip.MustParseAddr("fd50:6f64:6d69:0:1234:5678:9abc:def1")
)

// helloService is a Service on vip with the line and hello ports.
func helloService(name string, v netip.Addr, backends ...netip.Addr) Service {
	return Service{
		Namespace: "product", Name: name, VIP: v,
		Ports: []Port{
			{Protocol: TCP, Port: servicePort, TargetPort: linePort},
			{Protocol: TCP, Port: helloPort, TargetPort: helloPort},
		},
		Backends: backends,
	}
}

// addBackend starts another backend Pod at ip, serving as name, in a
// namespace of its own joined to the node through the veth host.
func (tp *topology) addBackend(tb testing.TB, suffix, host string, ip netip.Addr, name string) {
	tb.Helper()
	ns := tp.client + suffix
	_ = exec.Command("ip", "netns", "del", ns).Run()
	run(tb, "ip", "netns", "add", ns)
	tb.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	tp.prepare(tb, ns)
	tp.pod(tb, ns, host, ip)
	tp.serve(tb, ns, name)
}

// prepare sets up a new namespace as newTopology does.
func (tp *topology) prepare(tb testing.TB, ns string) {
	tb.Helper()
	for _, s := range []string{"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0", "net.ipv4.tcp_tw_reuse=1"} {
		run(tb, "ip", "netns", "exec", ns, "sysctl", "-qw", s)
	}
	run(tb, "ip", "-n", ns, "link", "set", "lo", "up")
}

// removePod takes the route to a backend off the node, as deleting its
// Pod does: the node answers what it would forward there with an ICMPv6
// "no route", which fails a connection at once (unlimited, so that no
// connection waits for a timeout instead).
func (tp *topology) removePod(tb testing.TB, ip netip.Addr) {
	tb.Helper()
	run(tb, "ip", "netns", "exec", tp.node, "sysctl", "-qw", "net.ipv6.icmp.ratelimit=0")
	run(tb, "ip", "-n", tp.node, "-6", "route", "del", ip.String()+"/128")
}

// recreateClient replaces the client namespace with a fresh one at the
// same address, as a new client container gets.
func (tp *topology) recreateClient(tb testing.TB) {
	tb.Helper()
	run(tb, "ip", "netns", "del", tp.client)
	run(tb, "ip", "netns", "add", tp.client)
	tp.prepare(tb, tp.client)
	tp.pod(tb, tp.client, "hc", clientIP)
}

// dialFrom connects from the client namespace to to from source port
// lport, or from the port connect picks when lport is 0.
func (tp *topology) dialFrom(tb testing.TB, lport uint16, to netip.AddrPort) (net.Conn, error) {
	tb.Helper()
	d := net.Dialer{Timeout: 3 * time.Second}
	if lport != 0 {
		d.LocalAddr = &net.TCPAddr{IP: clientIP.AsSlice(), Port: int(lport)}
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1) })
			return errors.Join(err, serr)
		}
	}
	var c net.Conn
	err := inNetNS(tp.nsPath(tp.client), func() (err error) {
		c, err = d.Dial("tcp6", to.String())
		return err
	})
	return c, err
}

// hello connects to the hello port at to from source port lport (0: the
// port connect picks) and reads the answer until the backend closes. It
// returns the answer and the source port.
func (tp *topology) hello(tb testing.TB, lport uint16, to netip.AddrPort) (reply, uint16, error) {
	tb.Helper()
	c, err := tp.dialFrom(tb, lport, to)
	if err != nil {
		return reply{}, lport, err
	}
	defer c.Close()
	used := uint16(c.LocalAddr().(*net.TCPAddr).Port)
	if err := c.SetDeadline(time.Now().Add(3 * time.Second)); err != nil {
		return reply{}, used, err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return reply{}, used, err
	}
	r, err := parseReply(string(b))
	return r, used, err
}

// helloRound connects once from each of ports to to and returns where
// each went; every connection must succeed.
func (tp *topology) helloRound(t *testing.T, ports []uint16, to netip.AddrPort) map[uint16]string {
	t.Helper()
	landed := map[uint16]string{}
	for _, p := range ports {
		r, _, err := tp.hello(t, p, to)
		if err != nil {
			t.Fatalf("connection from port %d to %v: %v", p, to, err)
		}
		landed[p] = r.backend
	}
	return landed
}

// outcome counts how the connections of a round after a rollout went.
type outcome struct {
	attempts, failed int
	firstErr         error
	elsewhere        map[string]int // connections answered by no current backend
}

func (o *outcome) add(r reply, err error, current ...string) {
	o.attempts++
	switch {
	case err != nil:
		o.failed++
		if o.firstErr == nil {
			o.firstErr = err
		}
	case !slices.Contains(current, r.backend):
		if o.elsewhere == nil {
			o.elsewhere = map[string]int{}
		}
		o.elsewhere[r.backend]++
	}
}

func (o *outcome) check(t *testing.T, what string) {
	t.Helper()
	if o.failed > 0 {
		t.Errorf("%s: %d of %d connections failed; the first: %v", what, o.failed, o.attempts, o.firstErr)
	}
	if len(o.elsewhere) > 0 {
		t.Errorf("%s: connections reached backends that are not the Service's: %v", what, o.elsewhere)
	}
}

// reusedPorts are the explicit source ports of the rollout tests.
func reusedPorts() []uint16 {
	var ports []uint16
	for i := range 100 {
		ports = append(ports, uint16(42000+7*i))
	}
	return ports
}

// onBackend counts the ports that went to name.
func onBackend(landed map[uint16]string, name string) int {
	n := 0
	for _, b := range landed {
		if b == name {
			n++
		}
	}
	return n
}

// TestRolloutReusedSourcePorts: after a rollout replaced b1 by b3, 100
// connections from the source ports 100 earlier connections used (about
// half of them on b1) all succeed and reach b2 or b3; also when the
// agent restarted in between and the new one adopted the pinned maps,
// flows and all.
func TestRolloutReusedSourcePorts(t *testing.T) {
	for _, tc := range []struct {
		name, tag string
		restart   bool
	}{{"one agent", "r", false}, {"agent restarted", "R", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var f *fixture
			pinPath := ""
			if tc.restart {
				f, pinPath = newPinnedFixture(t, tc.tag)
			} else {
				f = newFixture(t, tc.tag)
			}
			f.addBackend(t, "3", "hb3", backend3, "b3")
			f.apply(t, helloService("frontend", vip, backend1, backend2))
			to := netip.AddrPortFrom(vip, helloPort)
			ports := reusedPorts()
			landed := f.helloRound(t, ports, to)
			old := onBackend(landed, "b1")
			if old == 0 || old == len(ports) {
				t.Fatalf("%d of %d connections went to b1; the test needs flows on both backends", old, len(ports))
			}

			if tc.restart {
				if err := f.dp.Stop(); err != nil {
					t.Fatal(err)
				}
				dp, err := New(Config{NodeAddr: nodeIP, PodPrefix: podPrefix, NetNS: f.nsPath(f.node), PinPath: pinPath})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = dp.Stop() })
				if _, ok := dp.Inherited(); !ok {
					t.Fatal("the new dataplane did not adopt the pinned one")
				}
				renew(t, dp)
				f.dp = dp
			}
			f.apply(t, helloService("frontend", vip, backend2, backend3))
			f.removePod(t, backend1)

			var o outcome
			for _, p := range ports {
				r, _, err := f.hello(t, p, to)
				o.add(r, err, "b2", "b3")
			}
			o.check(t, fmt.Sprintf("from the source ports of the %d connections before the rollout, %d of which were on b1", len(ports), old))
		})
	}
}

// TestRolloutOldAddressReused: the address of the replaced backend comes
// back as a Pod of another Service (b1's namespace stands for it). No
// connection to the first Service from a reused source port reaches it;
// the other Service does.
func TestRolloutOldAddressReused(t *testing.T) {
	f := newFixture(t, "w")
	f.addBackend(t, "3", "hb3", backend3, "b3")
	f.apply(t, helloService("frontend", vip, backend1, backend2))
	to := netip.AddrPortFrom(vip, helloPort)
	ports := reusedPorts()
	landed := f.helloRound(t, ports, to)
	old := onBackend(landed, "b1")
	if old == 0 {
		t.Fatalf("no connection went to b1; the test needs flows on it")
	}

	f.apply(t, helloService("frontend", vip, backend2, backend3), helloService("backoffice", vip2, backend1))
	var o outcome
	for _, p := range ports {
		r, _, err := f.hello(t, p, to)
		o.add(r, err, "b2", "b3")
	}
	o.check(t, fmt.Sprintf("to the first Service from the source ports of %d connections that were on the reused address", old))
	if r, _, err := f.hello(t, 0, netip.AddrPortFrom(vip2, helloPort)); err != nil || r.backend != "b1" {
		t.Fatalf("the other Service: %v, %v; want its backend at the reused address", r, err)
	}
}

// TestRolloutDrainsEstablished: a connection open on the replaced
// backend keeps working after the rollout, new connections go to the
// current backends, and once the old backend closes it, a new connection
// from the same source port goes to a current backend too.
func TestRolloutDrainsEstablished(t *testing.T) {
	f := newFixture(t, "e")
	f.addBackend(t, "3", "hb3", backend3, "b3")
	f.apply(t, helloService("frontend", vip, backend1, backend2))

	var held net.Conn
	var first reply
	for i := 0; i < 64 && held == nil; i++ {
		c, err := f.dialFrom(t, 0, vipTCP)
		if err != nil {
			t.Fatal(err)
		}
		r, err := ask(c)
		if err != nil {
			t.Fatal(err)
		}
		if r.backend != "b1" {
			c.Close()
			continue
		}
		held, first = c, r
		defer c.Close()
	}
	if held == nil {
		t.Fatal("64 connections did not reach b1")
	}
	lport := uint16(held.LocalAddr().(*net.TCPAddr).Port)

	f.apply(t, helloService("frontend", vip, backend2, backend3))
	for i := range 5 {
		if r, err := ask(held); err != nil || r != first {
			t.Fatalf("request %d on the connection to the replaced backend: %v, %v; want %v", i, r, err, first)
		}
	}
	var o outcome
	for range 16 {
		r, _, err := f.hello(t, 0, netip.AddrPortFrom(vip, helloPort))
		o.add(r, err, "b2", "b3")
	}
	o.check(t, "new connections after the rollout")

	// The old backend ends the connection, as a Pod does once it is told
	// to stop.
	if err := held.SetDeadline(time.Now().Add(3 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(held, "bye\n"); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(held); err != nil || len(rest) > 0 {
		t.Fatalf("the connection to the replaced backend ended with %q, %v; want a clean close", rest, err)
	}
	held.Close()

	c, err := f.dialFrom(t, lport, vipTCP)
	if err != nil {
		t.Fatalf("a new connection from port %d: %v", lport, err)
	}
	defer c.Close()
	r, err := ask(c)
	if err != nil {
		t.Fatal(err)
	}
	if r.backend != "b2" && r.backend != "b3" {
		t.Fatalf("a new connection from port %d, the closed one's, reached %s; want b2 or b3", lport, r.backend)
	}
}

// TestRolloutFreshClient: a new client (a fresh namespace at the same
// address) makes its first connections after a rollout, none of them on
// a source port it used itself; connect carries on the port sequence of
// the earlier client, so they are on tuples whose flows went to the
// replaced backend. All must reach the current backends. The client's
// port range is narrowed to 200 ports so that the earlier client wraps it
// within 150 connections.
func TestRolloutFreshClient(t *testing.T) {
	f := newFixture(t, "g")
	f.addBackend(t, "3", "hb3", backend3, "b3")
	narrow := func() {
		run(t, "ip", "netns", "exec", f.client, "sysctl", "-qw", "net.ipv4.ip_local_port_range=40000 40199")
	}
	narrow()
	f.apply(t, helloService("frontend", vip, backend1, backend2))
	to := netip.AddrPortFrom(vip, helloPort)
	landed := map[uint16]string{}
	for i := range 150 {
		r, used, err := f.hello(t, 0, to)
		if err != nil {
			t.Fatalf("connection %d of the first client: %v", i, err)
		}
		landed[used] = r.backend
	}

	f.apply(t, helloService("frontend", vip, backend2, backend3))
	f.removePod(t, backend1)
	f.recreateClient(t)
	narrow()
	if err := f.dp.Reconcile(); err != nil {
		t.Fatal(err)
	}

	var o outcome
	seen := map[uint16]bool{}
	repeats := 0
	for range 15 {
		r, used, err := f.hello(t, 0, to)
		o.add(r, err, "b2", "b3")
		if err == nil {
			if seen[used] {
				t.Fatalf("the new client used port %d twice; the test needs its ports distinct", used)
			}
			seen[used] = true
			if landed[used] == "b1" {
				repeats++
			}
		}
	}
	if o.failed == 0 && repeats == 0 {
		t.Fatalf("none of the new client's ports %v had gone to b1; the test needs the kernel to carry on the earlier client's port sequence", seen)
	}
	o.check(t, fmt.Sprintf("a new client's first connections (%d of those that succeeded on tuples that had gone to the replaced backend)", repeats))
}
