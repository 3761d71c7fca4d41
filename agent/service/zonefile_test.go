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
// configuration with the zone file the agent keeps: with the agent's
// server stopped, known Services still resolve to their VIPs (TTL 5 s)
// and unknown names are still NXDOMAIN; a Service a restarted agent
// deletes stops resolving once CoreDNS has reloaded the zone, and the
// others keep resolving.
func TestCoreDNSAnswersWhileAgentIsDown(t *testing.T) {
	bin := coreDNSBinary(t)
	dir := t.TempDir()
	zone := filepath.Join(dir, "var", "lib", "podmin", "dns", "cluster.local.zone")
	agent := service.New(service.Config{Addr: "127.0.0.1:0", Cluster: cluster, ZonePath: zone})
	if err := agent.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := agent.Update(services([2]string{"product", "database"}, [2]string{"billing", "ledger"})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := agent.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(zone); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("zone file %v, %v: want it readable by CoreDNS (0644)", fi, err)
	}

	node := startCoreDNS(t, bin, "::1", func(port uint16) []byte {
		corefile, err := service.RenderCorefile(service.CorefileConfig{Bind: netip.MustParseAddr("::1"), Port: port,
			ZoneFile: zone, Upstreams: []string{fakeUpstream(t).String()}})
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
	}
	if r, _ := resolve(t, node, "database.product.svc.cluster.local.product.svc.cluster.local.", dns.TypeAAAA); r.Rcode != dns.RcodeNameError {
		t.Errorf("a search-list form with the agent down: %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
	}
	// Upper case is the same name.
	if r, _ := resolve(t, node, "Database.Product.svc.cluster.local.", dns.TypeAAAA); vipOf(t, r) != vip.For(cluster, "product", "database") {
		t.Error("a name in other case did not resolve from the zone file")
	}

	// A new agent (its clock, here, behind the serial the first one
	// wrote) deletes ledger: its next Update rewrites the zone with a
	// higher serial, which CoreDNS reloads.
	again := service.New(service.Config{Cluster: cluster, ZonePath: zone, Now: func() time.Time { return time.Unix(1000, 0) }})
	if err := again.Update(services([2]string{"product", "database"})); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, _ := resolve(t, node, "ledger.billing.svc.cluster.local.", dns.TypeAAAA)
		if r.Rcode == dns.RcodeNameError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted Service still resolves 20 s after the zone file changed: %v", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r, _ := resolve(t, node, "database.product.svc.cluster.local.", dns.TypeAAAA); vipOf(t, r) != vip.For(cluster, "product", "database") {
		t.Error("the Service that stayed no longer resolves")
	}
}

// TestZoneFile: every Update writes the served set as the cluster
// domain's zone, atomically and readable by CoreDNS, with a serial above
// every earlier one, also one an earlier agent wrote; a failure to write
// it is returned as ErrNotPersisted while the new records are served.
func TestZoneFile(t *testing.T) {
	dir := t.TempDir()
	zone := filepath.Join(dir, "dns", "cluster.local.zone")
	now := time.Unix(1_800_000_000, 0)
	s := service.New(service.Config{Cluster: cluster, ZonePath: zone, Now: func() time.Time { return now }})
	if err := s.Update(services([2]string{"product", "database"}, [2]string{"billing", "ledger"})); err != nil {
		t.Fatal(err)
	}
	records := zoneRecords(t, zone)
	if len(records) != 3 {
		t.Fatalf("zone file has %d records, want the SOA and two AAAA:\n%v", len(records), records)
	}
	soa, ok := records[0].(*dns.SOA)
	if !ok || soa.Hdr.Name != "cluster.local." || soa.Serial < 1_800_000_000 || soa.Minttl != service.TTL {
		t.Fatalf("zone apex %v, want the SOA of cluster.local. with a serial from the clock (1800000000 or above)", records[0])
	}
	first := soa.Serial
	for i, want := range [][2]string{{"billing", "ledger"}, {"product", "database"}} {
		rr, ok := records[i+1].(*dns.AAAA)
		if !ok || rr.Hdr.Name != want[1]+"."+want[0]+".svc.cluster.local." || rr.Hdr.Ttl != service.TTL || !rr.AAAA.Equal(vip.For(cluster, want[0], want[1]).AsSlice()) {
			t.Errorf("record %d: %v, want %s/%s's VIP", i+1, records[i+1], want[0], want[1])
		}
	}
	// Within the same second, and from a restarted agent whose clock is
	// behind, the serial still grows: CoreDNS reloads only a new serial.
	if err := s.Update(services([2]string{"product", "database"})); err != nil {
		t.Fatal(err)
	}
	second := zoneRecords(t, zone)[0].(*dns.SOA).Serial
	if second <= first {
		t.Errorf("second write in one second: serial %d, not above %d", second, first)
	}
	behind := service.New(service.Config{Cluster: cluster, ZonePath: zone, Now: func() time.Time { return now.Add(-time.Hour) }})
	if err := behind.Update(services([2]string{"product", "database"})); err != nil {
		t.Fatal(err)
	}
	if got := zoneRecords(t, zone)[0].(*dns.SOA).Serial; got <= second {
		t.Errorf("a restarted agent with a clock behind wrote serial %d, not above %d", got, second)
	}

	// A directory in the file's place makes every write fail.
	blocked := filepath.Join(dir, "blocked")
	if err := os.MkdirAll(filepath.Join(blocked, "zone", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := service.New(service.Config{Cluster: cluster, ZonePath: filepath.Join(blocked, "zone")})
	err := b.Update(services([2]string{"product", "database"}))
	if !errors.Is(err, service.ErrNotPersisted) || !strings.Contains(err.Error(), "the node's CoreDNS answers older ones") {
		t.Fatalf("Update with an unwritable zone file: %v, want ErrNotPersisted saying what it means", err)
	}
	if got := b.Services(); len(got) != 1 {
		t.Errorf("serves %v, want the new record served anyway", got)
	}
}

// zoneRecords parses a zone file.
func zoneRecords(t *testing.T, path string) []dns.RR {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []dns.RR
	zp := dns.NewZoneParser(strings.NewReader(string(data)), "", path)
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		out = append(out, rr)
	}
	if err := zp.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
