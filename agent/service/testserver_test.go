// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service_test

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"podmin.dev/podmin/agent/service"
)

const cluster = "prod"

// startServer runs a Server on a free loopback port until the test ends.
func startServer(t testing.TB, cfg service.Config) *service.Server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	s := service.New(cfg)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return s
}

// statePath is a fresh durable-file path in the test's directory.
func statePath(t testing.TB) string {
	return filepath.Join(t.TempDir(), "var", "lib", "podmin", "dns", "services.json")
}

// query sends one question over network ("udp" or "tcp") and returns the
// reply.
func query(t testing.TB, network string, addr netip.AddrPort, name string, qtype uint16, edns bool) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if edns {
		m.SetEdns0(4096, false)
	}
	return exchange(t, network, addr, m)
}

func exchange(t testing.TB, network string, addr netip.AddrPort, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 5 * time.Second, UDPSize: 65535}
	r, _, err := c.Exchange(m, addr.String())
	if err != nil {
		t.Fatalf("%s query %s %s: %v", network, m.Question[0].Name, dns.TypeToString[m.Question[0].Qtype], err)
	}
	if r.Id != m.Id {
		t.Fatalf("reply ID %d answers query ID %d", r.Id, m.Id)
	}
	return r
}

// resolve follows a truncated UDP answer with TCP, as stub resolvers do.
func resolve(t testing.TB, addr netip.AddrPort, name string, qtype uint16) (r *dns.Msg, viaTCP bool) {
	t.Helper()
	r = query(t, "udp", addr, name, qtype, false)
	if !r.Truncated {
		return r, false
	}
	return query(t, "tcp", addr, name, qtype, false), true
}

// vipOf returns the single AAAA of r, failing the test otherwise.
func vipOf(t testing.TB, r *dns.Msg) netip.Addr {
	t.Helper()
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("want one answer, got rcode %s and %d answers:\n%v", dns.RcodeToString[r.Rcode], len(r.Answer), r)
	}
	a, ok := r.Answer[0].(*dns.AAAA)
	if !ok {
		t.Fatalf("answer %v is not AAAA", r.Answer[0])
	}
	ip, _ := netip.AddrFromSlice(a.AAAA)
	return ip
}

func services(names ...[2]string) []service.Service {
	var out []service.Service
	for _, n := range names {
		out = append(out, service.Identity(cluster, n[0], n[1]))
	}
	return out
}
