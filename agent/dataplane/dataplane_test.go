// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

type fixture struct {
	*topology
	dp *Dataplane
}

func newFixture(t *testing.T, tag string) *fixture {
	t.Helper()
	tp := newTopology(t, tag)
	tp.serve(t, tp.b1, "b1")
	tp.serve(t, tp.b2, "b2")
	dp, err := New(Config{NodeAddr: nodeIP, PodPrefix: podPrefix, NetNS: tp.nsPath(tp.node)})
	if err != nil {
		t.Fatal(err)
	}
	renew(t, dp)
	t.Cleanup(func() { _ = dp.Stop() })
	return &fixture{tp, dp}
}

func service(backends ...netip.Addr) Service {
	return Service{
		Namespace: "product", Name: "frontend", VIP: vip,
		Ports: []Port{
			{Protocol: TCP, Port: servicePort, TargetPort: linePort},
			{Protocol: UDP, Port: dnsPort, TargetPort: udpPort},
			{Protocol: TCP, Port: sinkPort, TargetPort: sinkPort},
			{Protocol: TCP, Port: pingPort, TargetPort: pingPort},
			{Protocol: TCP, Port: ackPort, TargetPort: ackPort},
			{Protocol: TCP, Port: closerPort, TargetPort: closerPort},
		},
		Backends: backends,
	}
}

func (f *fixture) apply(t *testing.T, svcs ...Service) {
	t.Helper()
	if err := f.dp.Apply(t.Context(), svcs); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) stats(t *testing.T) Stats {
	t.Helper()
	s, err := f.dp.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var vipTCP = netip.AddrPortFrom(vip, servicePort)
var vipUDP = netip.AddrPortFrom(vip, dnsPort)

// checkSNAT asserts the backend saw the node address and a NAT port.
func checkSNAT(t *testing.T, r reply) {
	t.Helper()
	if r.from.Addr() != nodeIP || r.from.Port() < 30000 || r.from.Port() > 32767 {
		t.Errorf("backend %s saw the client as %v, want %v with a port in 30000-32767", r.backend, r.from, nodeIP)
	}
}

// attachedPrograms counts the TCX ingress programs on an interface of
// the node namespace, as the kernel reports them.
func (f *fixture) attachedPrograms(t *testing.T, name string) int {
	t.Helper()
	n := 0
	f.in(t, f.node, func() error {
		ifc, err := netInterfaceByName(name)
		if err != nil {
			return err
		}
		res, err := link.QueryPrograms(link.QueryOptions{Target: ifc, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			return err
		}
		n = len(res.Programs)
		return nil
	})
	return n
}

func TestTCPAndUDPThroughVIP(t *testing.T) {
	f := newFixture(t, "a")
	f.apply(t, service(backend1, backend2))

	if got := names(f.dp.Interfaces()); !slices.Equal(got, []string{"hb1", "hb2", "hc", "lo"}) {
		t.Fatalf("attached to %v, want the three Pod veths and loopback", got)
	}
	for _, ifc := range []string{"hb1", "hb2", "hc", "lo"} {
		if n := f.attachedPrograms(t, ifc); n != 1 {
			t.Errorf("%s has %d TCX ingress programs, want 1", ifc, n)
		}
	}
	if out, err := exec.Command("ip", "netns", "exec", f.node, "sysctl", "-n", "net.ipv4.ip_local_reserved_ports").Output(); err != nil || strings.TrimSpace(string(out)) != "30000-32767" {
		t.Errorf("the node reserves ports %q (%v), want the source-NAT range 30000-32767", out, err)
	}

	seen := map[string]int{}
	for i := range 16 {
		c, err := f.dial(t, vipTCP, 3*time.Second)
		if err != nil {
			t.Fatalf("TCP connection %d through the VIP: %v", i, err)
		}
		if got := c.RemoteAddr().String(); got != vipTCP.String() {
			t.Errorf("client sees %s, want the VIP %s", got, vipTCP)
		}
		r, err := ask(c)
		c.Close()
		if err != nil {
			t.Fatalf("TCP request %d through the VIP: %v", i, err)
		}
		checkSNAT(t, r)
		seen[r.backend]++
	}
	if seen["b1"] == 0 || seen["b2"] == 0 {
		t.Errorf("16 TCP flows went to %v, want both backends used", seen)
	}

	seen = map[string]int{}
	for i := range 16 {
		uc := f.udpSocket(t) // a new source port is a new flow
		r, from, err := askUDP(uc, vipUDP, fmt.Appendf(nil, "q%d", i), 3*time.Second)
		if err != nil {
			t.Fatalf("UDP datagram %d through the VIP: %v", i, err)
		}
		if from != vipUDP {
			t.Errorf("UDP reply came from %v, want the VIP tuple %v", from, vipUDP)
		}
		checkSNAT(t, r)
		seen[r.backend]++
	}
	if seen["b1"] == 0 || seen["b2"] == 0 {
		t.Errorf("16 UDP flows went to %v, want both backends used", seen)
	}

	// Direct traffic to a backend is not touched.
	c, err := f.dial(t, netip.AddrPortFrom(backend1, linePort), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ask(c)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if r.backend != "b1" || r.from.Addr() != clientIP {
		t.Errorf("direct request reached %s from %v, want b1 from the client %v", r.backend, r.from, clientIP)
	}

	s := f.stats(t)
	if s.NewFlows != 32 || s.Forwarded == 0 || s.Reversed == 0 {
		t.Errorf("stats %+v, want 32 new flows and packets both ways", s)
	}
}

func TestFlowSticksToBackend(t *testing.T) {
	f := newFixture(t, "s")
	f.apply(t, service(backend1, backend2))

	c, err := f.dial(t, vipTCP, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first, err := ask(c)
	if err != nil {
		t.Fatal(err)
	}
	u := f.udpSocket(t)
	firstUDP, _, err := askUDP(u, vipUDP, []byte("q"), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		r, err := ask(c)
		if err != nil {
			t.Fatal(err)
		}
		if r != first {
			t.Fatalf("TCP request %d went to %v, want %v like the first", i, r, first)
		}
		ru, _, err := askUDP(u, vipUDP, []byte("q"), 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if ru != firstUDP {
			t.Fatalf("UDP datagram %d went to %v, want %v like the first", i, ru, firstUDP)
		}
	}
}

func TestUnreadyBackendDrains(t *testing.T) {
	f := newFixture(t, "d")
	f.apply(t, service(backend1, backend2))

	// Open connections until one is on each backend.
	open := map[string]*reply{}
	conns := map[string]net.Conn{}
	for i := 0; i < 64 && len(open) < 2; i++ {
		c, err := f.dial(t, vipTCP, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		r, err := ask(c)
		if err != nil {
			t.Fatal(err)
		}
		if open[r.backend] != nil {
			c.Close()
			continue
		}
		open[r.backend] = &r
		conns[r.backend] = c
		defer c.Close()
	}
	if len(open) != 2 {
		t.Fatalf("64 connections did not reach both backends: %v", open)
	}

	// b1 becomes unready.
	f.apply(t, service(backend2))

	for i := range 5 {
		r, err := ask(conns["b1"])
		if err != nil {
			t.Fatalf("existing flow to the unready backend, request %d: %v", i, err)
		}
		if r != *open["b1"] {
			t.Fatalf("existing flow moved to %v, want it to stay on %v", r, *open["b1"])
		}
	}
	for i := range 16 {
		c, err := f.dial(t, vipTCP, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		r, err := ask(c)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if r.backend != "b2" {
			t.Fatalf("new flow %d went to %s, want only the ready b2", i, r.backend)
		}
	}
	for i := range 8 {
		r, _, err := askUDP(f.udpSocket(t), vipUDP, []byte("q"), 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if r.backend != "b2" {
			t.Fatalf("new UDP flow %d went to %s, want only the ready b2", i, r.backend)
		}
	}
}

func TestNoReadyBackendFailsClosed(t *testing.T) {
	f := newFixture(t, "z")
	f.apply(t, service())

	before := f.stats(t)
	if c, err := f.dial(t, vipTCP, 500*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("a TCP connection to a Service without ready backends succeeded")
	}
	if _, _, err := askUDP(f.udpSocket(t), vipUDP, []byte("q"), 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("UDP to a Service without ready backends: %v, want no answer", err)
	}
	// A port the Service does not have is dropped as well.
	if c, err := f.dial(t, netip.AddrPortFrom(vip, 81), 300*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("a TCP connection to a port the Service does not have succeeded")
	}
	after := f.stats(t)
	if after.Drops[DropNoBackend] <= before.Drops[DropNoBackend] || after.Drops[DropNoService] <= before.Drops[DropNoService] {
		t.Errorf("drop counters went from %v to %v, want no_backend and no_service to grow", before.Drops, after.Drops)
	}

	// Backends becoming ready open the Service.
	f.apply(t, service(backend2))
	c, err := f.dial(t, vipTCP, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r, err := ask(c); err != nil || r.backend != "b2" {
		t.Fatalf("after b2 became ready: %v, %v", r, err)
	}
}

func TestFragmentsDropped(t *testing.T) {
	f := newFixture(t, "f")
	f.apply(t, service(backend1, backend2))
	u := f.udpSocket(t)

	// The same socket's small datagram gets through, its fragmented one
	// (3000 bytes over a 1500-byte link) does not.
	if _, _, err := askUDP(u, vipUDP, []byte("small"), 3*time.Second); err != nil {
		t.Fatalf("unfragmented datagram: %v", err)
	}
	before := f.stats(t)
	if _, _, err := askUDP(u, vipUDP, make([]byte, 3000), 500*time.Millisecond); !isTimeout(err) {
		t.Fatalf("fragmented datagram to the VIP: %v, want it dropped", err)
	}
	after := f.stats(t)
	if after.Drops[DropFragment] < before.Drops[DropFragment]+2 {
		t.Errorf("fragment drops went from %d to %d, want both fragments counted", before.Drops[DropFragment], after.Drops[DropFragment])
	}
	// Fragments to a backend's own address are none of the dataplane's
	// business and pass.
	if _, _, err := askUDP(u, netip.AddrPortFrom(backend1, udpPort), make([]byte, 3000), 3*time.Second); err != nil {
		t.Fatalf("fragmented datagram straight to a backend: %v", err)
	}
}

func TestNATPortExhaustion(t *testing.T) {
	f := newFixture(t, "x")
	f.apply(t, service(backend1))

	// Occupy every NAT port towards b1:8080 with live flows.
	now := monotonicNow(t)
	for p := 30000; p <= 32767; p++ {
		k := reverseKey(backend1, linePort, nodeIP, uint16(p), TCP)
		v := reverseValue(netip.MustParseAddr("2001:db8:9::1"), uint16(p), vip, servicePort, now)
		if err := f.dp.objs.ReverseFlows.Update(k, v, ebpf.UpdateAny); err != nil {
			t.Fatal(err)
		}
	}
	before := f.stats(t)
	start := time.Now()
	if c, err := f.dial(t, vipTCP, 500*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("a connection got a NAT port although all were taken")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the refused connection took %v", d)
	}
	after := f.stats(t)
	if after.Drops[DropNATExhausted] <= before.Drops[DropNATExhausted] {
		t.Errorf("NAT exhaustion counter stayed at %d", after.Drops[DropNATExhausted])
	}
	if want := (Exhaustion{netip.AddrPortFrom(backend1, linePort), TCP, after.Drops[DropNATExhausted]}); len(after.Exhausted) != 1 || after.Exhausted[0] != want {
		t.Errorf("exhausted backend ports %+v, want %+v", after.Exhausted, want)
	}
	// Health names the backend port until a minute passes without a
	// refused flow.
	clock := time.Unix(1000, 0)
	f.dp.cfg.Now = func() time.Time { return clock }
	refused := regexp.MustCompile(`^source-NAT ports exhausted within the last 1m0s: refused (\d+) new flows to \[2001:db8:1:2::b1\]:8080 TCP; each backend port has 2768 NAT ports per node`)
	if m := refused.FindStringSubmatch(fmt.Sprint(f.dp.Health())); m == nil || m[1] != fmt.Sprint(after.Drops[DropNATExhausted]) {
		t.Errorf("health %v, want %d refused flows to b1:8080 reported", f.dp.Health(), after.Drops[DropNATExhausted])
	}
	clock = clock.Add(NATExhaustionWindow + time.Second)
	if err := f.dp.Health(); err != nil {
		t.Errorf("health a minute after the last refusal: %v", err)
	}
	// Other traffic is unaffected: UDP has its own ports.
	if _, _, err := askUDP(f.udpSocket(t), vipUDP, []byte("q"), 3*time.Second); err != nil {
		t.Fatalf("UDP while TCP ports are exhausted: %v", err)
	}
	// A refusal later is reported again, on its own.
	if c, err := f.dial(t, vipTCP, 500*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("a connection got a NAT port although all were taken")
	}
	later := f.stats(t).Drops[DropNATExhausted]
	if m := refused.FindStringSubmatch(fmt.Sprint(f.dp.Health())); m == nil || m[1] != fmt.Sprint(later-after.Drops[DropNATExhausted]) {
		t.Errorf("health %v, want the %d newly refused flows reported", f.dp.Health(), later-after.Drops[DropNATExhausted])
	}

	// Once the flows are gone, ports are free again.
	for p := 30000; p <= 32767; p++ {
		_ = f.dp.objs.ReverseFlows.Delete(reverseKey(backend1, linePort, nodeIP, uint16(p), TCP))
	}
	c, err := f.dial(t, vipTCP, 3*time.Second)
	if err != nil {
		t.Fatalf("after ports were freed: %v", err)
	}
	defer c.Close()
	if _, err := ask(c); err != nil {
		t.Fatal(err)
	}

	// Run passes Health to Config.Health after every reconciliation.
	reports := make(chan error, 100)
	f.dp.cfg.Health = func(err error) { reports <- err }
	f.dp.cfg.ReconcileInterval = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.dp.Run(ctx) }()
	select {
	case err := <-reports:
		if m := refused.FindStringSubmatch(fmt.Sprint(err)); m == nil {
			t.Errorf("Run reported %v, want the refused flows", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Run reported no health within 10s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestClosedFlowsFreePorts opens and closes more connections to one
// backend than there are NAT ports: a flow whose close completed gives its
// port back at once, so none is refused.
func TestClosedFlowsFreePorts(t *testing.T) {
	f := newFixture(t, "p")
	f.apply(t, service(backend1))
	to := netip.AddrPortFrom(vip, pingPort)
	for i := range 3200 {
		c, err := f.dial(t, to, 3*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		var one [1]byte
		if _, err := c.Write(one[:]); err != nil {
			t.Fatal(err)
		}
		if err := c.SetDeadline(time.Now().Add(3 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(one[:]); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		c.Close()
	}
	if s := f.stats(t); s.Drops[DropNATExhausted] != 0 || s.NewFlows != 3200 {
		t.Errorf("stats %+v, want 3200 new flows and no NAT exhaustion", s)
	}
}

// TestExtensionHeadersDropped sends a datagram whose TCP/UDP header is
// not immediate (a hop-by-hop options header comes first) to the VIP: the
// parser does not walk extension-header chains, so it is refused.
func TestExtensionHeadersDropped(t *testing.T) {
	f := newFixture(t, "h")
	f.apply(t, service(backend1, backend2))
	u := f.udpSocket(t)
	raw, err := u.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	// Hop-by-hop header: next header (set by the kernel), length 0, PadN
	// of four bytes.
	hbh := string([]byte{0, 0, 1, 4, 0, 0, 0, 0})
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptString(int(fd), unix.IPPROTO_IPV6, unix.IPV6_HOPOPTS, hbh)
	}); err != nil || serr != nil {
		t.Fatalf("set hop-by-hop options: %v %v", err, serr)
	}
	before := f.stats(t)
	if _, _, err := askUDP(u, vipUDP, []byte("q"), 500*time.Millisecond); !isTimeout(err) {
		t.Fatalf("datagram with an extension header to the VIP: %v, want it dropped", err)
	}
	if after := f.stats(t); after.Drops[DropExtensionHeader] <= before.Drops[DropExtensionHeader] {
		t.Errorf("extension header drops stayed at %d", after.Drops[DropExtensionHeader])
	}
	// The same socket reaches a backend directly: the header itself is fine.
	if _, _, err := askUDP(u, netip.AddrPortFrom(backend1, udpPort), []byte("q"), 3*time.Second); err != nil {
		t.Fatalf("datagram with an extension header straight to a backend: %v", err)
	}
}

// TestRemoteBackendRepliesOnDefaultRoute puts the backend behind the
// node's default-route interface, as a Pod on another node is: its
// replies to the node address arrive there and must be reverse-NATed
// there, or the client would never see them.
func TestRemoteBackendRepliesOnDefaultRoute(t *testing.T) {
	f := newFixture(t, "o")
	remoteNS := f.client + "r"
	remote := netip.MustParseAddr("2001:db8:9::b3")
	run(t, "ip", "netns", "add", remoteNS)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", remoteNS).Run() })
	run(t, "ip", "netns", "exec", remoteNS, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0")
	run(t, "ip", "netns", "exec", remoteNS, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0")
	f.pod(t, remoteNS, "up0", remote)
	run(t, "ip", "-n", f.node, "-6", "route", "del", remote.String()+"/128")
	run(t, "ip", "-n", f.node, "-6", "route", "add", "default", "dev", "up0", "metric", "100")
	f.serve(t, remoteNS, "remote")

	f.apply(t, service(remote))
	if got := names(f.dp.Interfaces()); !slices.Contains(got, "up0") {
		t.Fatalf("attached to %v, want the default-route interface up0 among them", got)
	}
	c, err := f.dial(t, vipTCP, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := ask(c)
	if err != nil {
		t.Fatal(err)
	}
	if r.backend != "remote" {
		t.Fatalf("reached %s, want the remote backend", r.backend)
	}
	checkSNAT(t, r)
	ru, from, err := askUDP(f.udpSocket(t), vipUDP, []byte("q"), 3*time.Second)
	if err != nil || ru.backend != "remote" || from != vipUDP {
		t.Fatalf("UDP via the remote backend: %v from %v, %v", ru, from, err)
	}
}

// TestHairpin: a Pod calling its own Service may be its own backend; the
// packet goes out and back through the same veth.
func TestHairpin(t *testing.T) {
	f := newFixture(t, "l")
	f.serve(t, f.client, "self")
	f.apply(t, service(clientIP))
	c, err := f.dial(t, vipTCP, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := ask(c)
	if err != nil {
		t.Fatal(err)
	}
	if r.backend != "self" {
		t.Fatalf("reached %s, want the client itself", r.backend)
	}
	checkSNAT(t, r)
	ru, from, err := askUDP(f.udpSocket(t), vipUDP, []byte("q"), 3*time.Second)
	if err != nil || ru.backend != "self" || from != vipUDP {
		t.Fatalf("UDP hairpin: %v from %v, %v", ru, from, err)
	}
}
