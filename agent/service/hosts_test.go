// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/internal/vip"
)

// TestCoreDNSAnswersWhileAgentIsDown runs CoreDNS on the rendered
// configuration with the hosts file the agent keeps: with the agent's
// server stopped, known Services still resolve to their VIPs (TTL 5 s);
// a Service the agent later deletes from the file stops resolving once
// CoreDNS has reloaded it, and the others keep resolving.
func TestCoreDNSAnswersWhileAgentIsDown(t *testing.T) {
	bin := coreDNSBinary(t)
	dir := t.TempDir()
	hosts := filepath.Join(dir, "var", "lib", "podmin", "dns", "hosts")
	agent := service.New(service.Config{Addr: "127.0.0.1:0", Cluster: cluster, HostsPath: hosts})
	if err := agent.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := agent.Update(services([2]string{"product", "database"}, [2]string{"billing", "ledger"})); err != nil {
		t.Fatal(err)
	}
	agentAddr := agent.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := agent.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(hosts); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("hosts file %v, %v: want it readable by CoreDNS (0644)", fi, err)
	}

	node := startCoreDNS(t, bin, "::1", func(port uint16) []byte {
		corefile, err := service.RenderCorefile(service.CorefileConfig{Bind: netip.MustParseAddr("::1"), Port: port,
			Agent: agentAddr, Hosts: hosts, Upstreams: []string{fakeUpstream(t).String()}})
		if err != nil {
			t.Fatal(err)
		}
		return corefile
	}, "database.product.svc.cluster.local.")

	for _, s := range [][2]string{{"product", "database"}, {"billing", "ledger"}} {
		r, _ := resolve(t, node, s[1]+"."+s[0]+".svc.cluster.local.", dns.TypeAAAA)
		if got := vipOf(t, r); got != vip.For(cluster, s[0], s[1]) {
			t.Errorf("%s/%s with the agent down: %v, want its VIP", s[0], s[1], got)
		}
		if ttl := r.Answer[0].Header().Ttl; ttl != service.TTL {
			t.Errorf("%s/%s answered with TTL %d, want %d", s[0], s[1], ttl, service.TTL)
		}
	}
	// Upper case is the same name.
	if r, _ := resolve(t, node, "Database.Product.svc.cluster.local.", dns.TypeAAAA); vipOf(t, r) != vip.For(cluster, "product", "database") {
		t.Error("a name in other case did not resolve from the hosts file")
	}

	// The agent, back, deletes ledger: its next Update rewrites the file.
	again := service.New(service.Config{Cluster: cluster, HostsPath: hosts})
	if err := again.Update(services([2]string{"product", "database"})); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, _ := resolve(t, node, "ledger.billing.svc.cluster.local.", dns.TypeAAAA)
		if len(r.Answer) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted Service still resolves 20 s after the hosts file changed: %v", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r, _ := resolve(t, node, "database.product.svc.cluster.local.", dns.TypeAAAA); vipOf(t, r) != vip.For(cluster, "product", "database") {
		t.Error("the Service that stayed no longer resolves")
	}
}

// TestHostsFile: every Update writes the served set as a hosts file,
// atomically and readable by CoreDNS; a failure to write it is returned
// as ErrNotPersisted while the new records are served.
func TestHostsFile(t *testing.T) {
	dir := t.TempDir()
	hosts := filepath.Join(dir, "dns", "hosts")
	s := service.New(service.Config{Cluster: cluster, HostsPath: hosts})
	if err := s.Update(services([2]string{"product", "database"}, [2]string{"billing", "ledger"})); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(hosts)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Service VIPs of this node's cluster, written by podmin-agent for CoreDNS.\n" +
		vip.For(cluster, "billing", "ledger").String() + " ledger.billing.svc.cluster.local.\n" +
		vip.For(cluster, "product", "database").String() + " database.product.svc.cluster.local.\n"
	if string(data) != want {
		t.Errorf("hosts file:\n%s\nwant:\n%s", data, want)
	}
	first, err := os.Stat(hosts)
	if err != nil {
		t.Fatal(err)
	}
	// Same size, written at once: CoreDNS, which compares size and time,
	// must still see a new file.
	if err := s.Update(services([2]string{"product", "database"}, [2]string{"billing", "ledger"})); err != nil {
		t.Fatal(err)
	}
	second, err := os.Stat(hosts)
	if err != nil {
		t.Fatal(err)
	}
	if second.Size() != first.Size() || !second.ModTime().After(first.ModTime()) {
		t.Errorf("rewritten hosts file: size %d then %d, time %v then %v: want a later time", first.Size(), second.Size(), first.ModTime(), second.ModTime())
	}

	// A directory in the file's place makes every write fail.
	blocked := filepath.Join(dir, "blocked")
	if err := os.MkdirAll(filepath.Join(blocked, "hosts", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := service.New(service.Config{Cluster: cluster, HostsPath: filepath.Join(blocked, "hosts")})
	err = b.Update(services([2]string{"product", "database"}))
	if !errors.Is(err, service.ErrNotPersisted) || !strings.Contains(err.Error(), "CoreDNS would answer older ones while the agent is down") {
		t.Fatalf("Update with an unwritable hosts file: %v, want ErrNotPersisted saying what it means", err)
	}
	if got := b.Services(); len(got) != 1 {
		t.Errorf("serves %v, want the new record served anyway", got)
	}
}
