// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service_test

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/internal/vip"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the rendering:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestRenderCorefileGolden(t *testing.T) {
	cases := []struct {
		file string
		cfg  service.CorefileConfig
	}{
		{"Corefile.node.golden", service.CorefileConfig{Bind: netip.MustParseAddr("2600:1f18:4a3:6b00:8c1d:2e44:a9b0:11")}},
		{"Corefile.local.golden", service.CorefileConfig{Bind: netip.MustParseAddr("::1"), Port: 5353,
			ZoneFile:  "/srv/node-a/var/lib/podmin/dns/cluster.local.zone",
			Upstreams: []string{"127.0.0.1:5300", "fd00:ec2::253"}}},
	}
	for _, c := range cases {
		got, err := service.RenderCorefile(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, c.file, got)
	}
}

func TestRenderCorefileRefuses(t *testing.T) {
	node := netip.MustParseAddr("2600:1f18::10")
	cases := []struct {
		cfg service.CorefileConfig
		err string
	}{
		{service.CorefileConfig{}, "CoreDNS bind address invalid IP is not a unicast IPv6 address: pass the node's global IPv6 address"},
		{service.CorefileConfig{Bind: netip.MustParseAddr("10.0.0.1")}, "CoreDNS bind address 10.0.0.1 is not a unicast IPv6 address"},
		{service.CorefileConfig{Bind: netip.MustParseAddr("::")}, "CoreDNS bind address :: is not a unicast IPv6 address"},
		{service.CorefileConfig{Bind: node, Upstreams: []string{"dns.example"}}, `upstream "dns.example" is neither an IP address, an address:port nor a resolv.conf path`},
		{service.CorefileConfig{Bind: node, Upstreams: []string{"/etc/resolv.conf }\n. {"}}, `is not a plain resolv.conf path`},
		{service.CorefileConfig{Bind: node, ZoneFile: "cluster.local.zone"}, `zone file "cluster.local.zone" is not a plain absolute path`},
		{service.CorefileConfig{Bind: node, ZoneFile: "/var/lib/podmin/dns/zone {\n}"}, `is not a plain absolute path`},
	}
	for _, c := range cases {
		_, err := service.RenderCorefile(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%+v: error %v, want %q", c.cfg, err, c.err)
		}
	}
}

func TestRenderResolvConfGolden(t *testing.T) {
	got, err := service.RenderResolvConf(netip.MustParseAddr("2600:1f18:4a3:6b00:8c1d:2e44:a9b0:11"), "product")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "resolv.conf.product.golden", got)
	if _, err := service.RenderResolvConf(netip.MustParseAddr("::1"), "Product"); err == nil ||
		err.Error() != `"Product" is not a valid Pod namespace: use 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit` {
		t.Errorf("bad namespace: %v", err)
	}
}

// TestSearchListFromPodNamespace resolves short names the way a Pod's stub
// resolver does: it parses the rendered resolv.conf with an independent
// parser, expands each name through the search list and ndots, and asks
// the server each candidate in turn over UDP until one has an answer.
func TestSearchListFromPodNamespace(t *testing.T) {
	s := startServer(t, service.Config{})
	if err := s.Update(services([2]string{"product", "database"}, [2]string{"billing", "database"}, [2]string{"billing", "ledger"})); err != nil {
		t.Fatal(err)
	}
	lookup := func(namespace, name string) (netip.Addr, []string) {
		conf, err := service.RenderResolvConf(netip.MustParseAddr("::1"), namespace)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := dns.ClientConfigFromReader(bytes.NewReader(conf))
		if err != nil {
			t.Fatal(err)
		}
		if cc.Ndots != 5 {
			t.Fatalf("ndots %d", cc.Ndots)
		}
		var tried []string
		for _, candidate := range cc.NameList(name) {
			tried = append(tried, candidate)
			r, _ := resolve(t, s.Addr(), candidate, dns.TypeAAAA)
			if r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0 {
				return vipOf(t, r), tried
			}
			if r.Rcode != dns.RcodeNameError && r.Rcode != dns.RcodeRefused {
				t.Fatalf("%s: rcode %s", candidate, dns.RcodeToString[r.Rcode])
			}
		}
		return netip.Addr{}, tried
	}
	cases := []struct {
		namespace, name string
		want            netip.Addr
		tries           int
	}{
		{"product", "database", vip.For(cluster, "product", "database"), 1},
		{"product", "database.product", vip.For(cluster, "product", "database"), 2},
		{"product", "database.product.svc.cluster.local", vip.For(cluster, "product", "database"), 4},
		{"product", "database.product.svc.cluster.local.", vip.For(cluster, "product", "database"), 1},
		{"product", "database.billing", vip.For(cluster, "billing", "database"), 2},
		{"billing", "database", vip.For(cluster, "billing", "database"), 1},
		{"billing", "ledger", vip.For(cluster, "billing", "ledger"), 1},
		// Bare names are relative to the Pod's own namespace.
		{"product", "ledger", netip.Addr{}, 4},
		{"product", "ledger.product", netip.Addr{}, 4},
	}
	for _, c := range cases {
		got, tried := lookup(c.namespace, c.name)
		if got != c.want || len(tried) < c.tries || (c.want.IsValid() && len(tried) != c.tries) {
			t.Errorf("from %s, %q: got %v after trying %v; want %v after %d tries", c.namespace, c.name, got, tried, c.want, c.tries)
		}
	}
}
