// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/internal/vip"
)

// EnvCoreDNS names a CoreDNS binary for the tests and benchmarks that run
// one; without it they look for bin/tools/coredns (make tools).
const EnvCoreDNS = "PODMIN_COREDNS"

// coreDNSBinary returns the CoreDNS to run, or skips with how to get one.
func coreDNSBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvCoreDNS); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", EnvCoreDNS, p, err)
		}
		return p
	}
	p, err := filepath.Abs(filepath.Join("..", "..", "bin", "tools", "coredns"))
	if err == nil {
		if _, err = os.Stat(p); err == nil {
			return p
		}
	}
	t.Skipf("CoreDNS is not available: run make tools (builds bin/tools/coredns) or set %s to a CoreDNS binary", EnvCoreDNS)
	return ""
}

// freePort returns a port free for both UDP and TCP on ip at the moment of
// the call.
func freePort(t testing.TB, ip string) uint16 {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		pc, err := net.ListenPacket("udp", l.Addr().String())
		l.Close()
		if err == nil {
			pc.Close()
			return uint16(l.Addr().(*net.TCPAddr).Port)
		}
	}
	t.Fatal("no free port")
	return 0
}

// startCoreDNS runs bin on the Corefile render returns for a free port
// on ip, until the test ends, and waits until CoreDNS answers probe (a
// name it serves) over UDP. A port taken between the check and CoreDNS's
// bind makes it exit; it is then started again on another port.
func startCoreDNS(t testing.TB, bin, ip string, render func(port uint16) []byte, probe string) netip.AddrPort {
	t.Helper()
	var out strings.Builder
	for range 3 {
		out.Reset()
		port := freePort(t, ip)
		addr := netip.AddrPortFrom(netip.MustParseAddr(ip), port)
		dir := t.TempDir()
		path := filepath.Join(dir, "Corefile")
		if err := os.WriteFile(path, render(port), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, bin, "-conf", path, "-quiet")
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if probeCoreDNS(addr, probe, exited) {
			t.Cleanup(func() {
				cancel()
				<-exited
			})
			return addr
		}
		cancel()
		<-exited
		if !strings.Contains(out.String(), "address already in use") {
			break
		}
	}
	t.Fatalf("CoreDNS did not answer %s within 20 s:\n%s", probe, out.String())
	return netip.AddrPort{}
}

// probeCoreDNS polls addr until it answers probe with a record while the
// process is running (a truncated reply counts: TCP carries the record).
func probeCoreDNS(addr netip.AddrPort, probe string, exited <-chan error) bool {
	c := &dns.Client{Net: "udp", Timeout: 200 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion(probe, dns.TypeAAAA)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		select {
		case <-exited:
			return false
		default:
		}
		if r, _, err := c.Exchange(m, addr.String()); err == nil && r.Rcode == dns.RcodeSuccess && (len(r.Answer) > 0 || r.Truncated) {
			select {
			case <-exited:
				return false
			default:
				return true
			}
		}
	}
	return false
}

// fakeUpstream stands in for the provider's resolver: it answers every
// name with one AAAA record, 2001:db8::53.
func fakeUpstream(t testing.TB) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.RecursionAvailable = true
		if len(r.Question) == 1 && r.Question[0].Qtype == dns.TypeAAAA {
			rr, _ := dns.NewRR(r.Question[0].Name + " 60 IN AAAA 2001:db8::53")
			m.Answer = append(m.Answer, rr)
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return netip.MustParseAddrPort(pc.LocalAddr().String())
}

// TestRenderedCorefileRunsInCoreDNS runs CoreDNS on the rendered
// configuration in the local node mode (bound to ::1) over the zone file
// the agent writes and a fake provider resolver, and resolves through it
// the way a Pod does: the Service's VIP, NXDOMAIN with the zone's SOA for
// an unknown Service and for the longer forms a Pod's search list makes
// of a full name (never sent upstream), no AAAA-less answer but NODATA
// for another type, and every other name from upstream.
func TestRenderedCorefileRunsInCoreDNS(t *testing.T) {
	bin := coreDNSBinary(t)
	zone := filepath.Join(t.TempDir(), "cluster.local.zone")
	agent := service.New(service.Config{Cluster: cluster, ZonePath: zone})
	if err := agent.Update(services([2]string{"product", "database"})); err != nil {
		t.Fatal(err)
	}
	upstream := fakeUpstream(t)
	node := startCoreDNS(t, bin, "::1", func(port uint16) []byte {
		corefile, err := service.RenderCorefile(service.CorefileConfig{Bind: netip.MustParseAddr("::1"), Port: port,
			ZoneFile: zone, Upstreams: []string{upstream.String()}})
		if err != nil {
			t.Fatal(err)
		}
		return corefile
	}, "database.product.svc.cluster.local.")

	r, _ := resolve(t, node, "database.product.svc.cluster.local.", dns.TypeAAAA)
	if got := vipOf(t, r); got != vip.For(cluster, "product", "database") || r.Answer[0].Header().Ttl != service.TTL {
		t.Errorf("Service through CoreDNS: %v", r)
	}
	for _, name := range []string{"nothing.product.svc.cluster.local.", "database.product.svc.cluster.local.product.svc.cluster.local.",
		"database.product.svc.cluster.local.cluster.local."} {
		r, _ = resolve(t, node, name, dns.TypeAAAA)
		if r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA {
			t.Errorf("%s through CoreDNS: %s with authority %v, want NXDOMAIN with the SOA", name, dns.RcodeToString[r.Rcode], r.Ns)
		}
	}
	r, _ = resolve(t, node, "database.product.svc.cluster.local.", dns.TypeA)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
		t.Errorf("A of a Service through CoreDNS: %v, want NODATA", r)
	}
	r, _ = resolve(t, node, "example.com.", dns.TypeAAAA)
	if got := vipOf(t, r); got != netip.MustParseAddr("2001:db8::53") {
		t.Errorf("other names through CoreDNS: %v", got)
	}
}
