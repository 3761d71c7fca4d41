// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/internal/vip"
)

func TestAnswersAAAAOverUDPAndTCP(t *testing.T) {
	s := startServer(t, service.Config{Cluster: cluster})
	if err := s.Update(services([2]string{"product", "database"}, [2]string{"product", "frontend"}, [2]string{"default", "web"})); err != nil {
		t.Fatal(err)
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, edns := range []bool{false, true} {
			// Mixed case, as resolvers using 0x20 randomisation send it:
			// the reply echoes the question as asked.
			name := "DataBase.Product.SVC.cluster.LOCAL."
			r := query(t, network, s.Addr(), name, dns.TypeAAAA, edns)
			if got, want := vipOf(t, r), vip.For(cluster, "product", "database"); got != want {
				t.Errorf("%s: VIP %v, want %v", network, got, want)
			}
			if !r.Authoritative || r.RecursionAvailable {
				t.Errorf("%s: AA=%v RA=%v, want an authoritative answer without recursion", network, r.Authoritative, r.RecursionAvailable)
			}
			if h := r.Answer[0].Header(); h.Ttl != 5 || h.Name != name {
				t.Errorf("%s: answer owner %q TTL %d, want %q TTL 5", network, h.Name, h.Ttl, name)
			}
			if r.Question[0].Name != name {
				t.Errorf("%s: question came back as %q", network, r.Question[0].Name)
			}
			if opt := r.IsEdns0(); (opt != nil) != edns {
				t.Errorf("%s: EDNS in query %v, OPT in reply %v", network, edns, opt)
			} else if edns && opt.UDPSize() != service.DefaultMaxUDPPayload {
				t.Errorf("%s: advertised UDP size %d", network, opt.UDPSize())
			}
		}
	}
	if got := vipOf(t, query(t, "udp", s.Addr(), "web.default.svc.cluster.local.", dns.TypeAAAA, false)); got != vip.For(cluster, "default", "web") {
		t.Errorf("web.default: %v", got)
	}
}

func TestANYReturnsTheAAAAContent(t *testing.T) {
	s := startServer(t, service.Config{})
	if err := s.Update(services([2]string{"product", "database"})); err != nil {
		t.Fatal(err)
	}
	for _, network := range []string{"udp", "tcp"} {
		r := query(t, network, s.Addr(), "database.product.svc.cluster.local.", dns.TypeANY, false)
		if got := vipOf(t, r); got != vip.For(cluster, "product", "database") {
			t.Errorf("%s ANY: %v", network, got)
		}
		if r.Answer[0].Header().Rrtype != dns.TypeAAAA || len(r.Ns) != 0 || len(r.Extra) != 0 {
			t.Errorf("%s ANY: want only the AAAA record, got\n%v", network, r)
		}
	}
}

func TestNegativeAnswers(t *testing.T) {
	s := startServer(t, service.Config{})
	if err := s.Update(services([2]string{"product", "database"})); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		qtype  uint16
		rcode  int
		soa    bool // the zone's SOA is in the authority section
		answer uint16
	}{
		{"cache.product.svc.cluster.local.", dns.TypeAAAA, dns.RcodeNameError, true, 0},
		{"database.other.svc.cluster.local.", dns.TypeAAAA, dns.RcodeNameError, true, 0},
		{"database.product.product.svc.cluster.local.", dns.TypeAAAA, dns.RcodeNameError, true, 0},
		{"x.database.product.svc.cluster.local.", dns.TypeAAAA, dns.RcodeNameError, true, 0},
		{"other.svc.cluster.local.", dns.TypeAAAA, dns.RcodeNameError, true, 0},
		// A known Service has no A record (IPv6 only) nor TXT: NODATA.
		{"database.product.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, true, 0},
		{"database.product.svc.cluster.local.", dns.TypeTXT, dns.RcodeSuccess, true, 0},
		// A namespace with Services exists as an empty non-terminal.
		{"product.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, true, 0},
		{"svc.cluster.local.", dns.TypeSOA, dns.RcodeSuccess, false, dns.TypeSOA},
		{"svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, true, 0},
		// Outside the zone the server neither answers nor recurses.
		{"example.com.", dns.TypeAAAA, dns.RcodeRefused, false, 0},
		{"cluster.local.", dns.TypeAAAA, dns.RcodeRefused, false, 0},
		{"xsvc.cluster.local.", dns.TypeAAAA, dns.RcodeRefused, false, 0},
		{"svc.cluster.local.", dns.TypeAXFR, dns.RcodeRefused, false, 0},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, c := range cases {
			r := query(t, network, s.Addr(), c.name, c.qtype, false)
			what := network + " " + c.name + " " + dns.TypeToString[c.qtype]
			if r.Rcode != c.rcode {
				t.Errorf("%s: rcode %s, want %s", what, dns.RcodeToString[r.Rcode], dns.RcodeToString[c.rcode])
			}
			if c.answer == 0 && len(r.Answer) != 0 || c.answer != 0 && (len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != c.answer) {
				t.Errorf("%s: answers %v", what, r.Answer)
			}
			if !c.soa {
				continue
			}
			if len(r.Ns) != 1 {
				t.Errorf("%s: authority %v, want the zone's SOA", what, r.Ns)
				continue
			}
			soa, ok := r.Ns[0].(*dns.SOA)
			if !ok || soa.Hdr.Name != service.Zone || soa.Minttl != 5 || soa.Hdr.Ttl != 5 {
				t.Errorf("%s: authority %v, want the SOA of %s with TTL and minimum 5", what, r.Ns[0], service.Zone)
			}
		}
	}
}

// TestTruncationAndTCPFallback lowers the UDP limit below the answer's
// size: the UDP reply carries TC and no records, and TCP carries the
// answer.
func TestTruncationAndTCPFallback(t *testing.T) {
	s := startServer(t, service.Config{MaxUDPPayload: 64})
	if err := s.Update(services([2]string{"product", "database"})); err != nil {
		t.Fatal(err)
	}
	for _, edns := range []bool{false, true} {
		r := query(t, "udp", s.Addr(), "database.product.svc.cluster.local.", dns.TypeAAAA, edns)
		if !r.Truncated || len(r.Answer) != 0 || len(r.Ns) != 0 {
			t.Fatalf("edns %v: want a truncated reply without records, got\n%v", edns, r)
		}
		if len(r.Question) != 1 || r.Question[0].Name != "database.product.svc.cluster.local." {
			t.Errorf("edns %v: the truncated reply lost the question: %v", edns, r.Question)
		}
		if (r.IsEdns0() != nil) != edns {
			t.Errorf("edns %v: OPT in the truncated reply: %v", edns, r.IsEdns0())
		}
	}
	r, viaTCP := resolve(t, s.Addr(), "database.product.svc.cluster.local.", dns.TypeAAAA)
	if !viaTCP || r.Truncated {
		t.Fatalf("want the answer over TCP after TC, got viaTCP=%v\n%v", viaTCP, r)
	}
	if got := vipOf(t, r); got != vip.For(cluster, "product", "database") {
		t.Errorf("TCP answer %v", got)
	}
	// NXDOMAIN with its SOA does not fit either.
	r, viaTCP = resolve(t, s.Addr(), "nothing.product.svc.cluster.local.", dns.TypeAAAA)
	if !viaTCP || r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 {
		t.Errorf("NXDOMAIN via TCP %v:\n%v", viaTCP, r)
	}
}

// TestLargestNamesFitClassicUDP documents why truncation never happens
// with the default limits: the longest legal Service name's answer, and
// its NXDOMAIN, fit the 512 bytes every client accepts.
func TestLargestNamesFitClassicUDP(t *testing.T) {
	s := startServer(t, service.Config{})
	long := [2]string{strings.Repeat("n", 63), strings.Repeat("s", 63)}
	if err := s.Update(services(long)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{
		long[1] + "." + long[0] + "." + service.Zone,
		strings.Repeat("x", 63) + "." + long[1] + "." + long[0] + "." + service.Zone,
	} {
		for _, qtype := range []uint16{dns.TypeAAAA, dns.TypeANY, dns.TypeA} {
			r := query(t, "udp", s.Addr(), name, qtype, false)
			packed, err := r.Pack()
			if err != nil {
				t.Fatal(err)
			}
			if r.Truncated || len(packed) > 512 {
				t.Errorf("%s %s: %d bytes, truncated %v", name, dns.TypeToString[qtype], len(packed), r.Truncated)
			}
			if len(r.Answer)+len(r.Ns) != 1 {
				t.Errorf("%s %s: want one record, got\n%v", name, dns.TypeToString[qtype], r)
			}
		}
	}
}

func TestUpdateIsAllOrNothing(t *testing.T) {
	s := startServer(t, service.Config{Cluster: cluster})
	good := services([2]string{"product", "database"})
	if err := s.Update(good); err != nil {
		t.Fatal(err)
	}
	other := service.Identity("staging", "product", "cache")
	cases := []struct {
		name string
		in   []service.Service
		err  string
	}{
		{"bad name", append(services([2]string{"product", "web"}), service.Service{Namespace: "product", Name: "Web_1", VIP: vip.For(cluster, "product", "Web_1")}),
			`service product/Web_1: "Web_1" is not a valid name: use 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit`},
		{"bad namespace", []service.Service{{Namespace: "", Name: "x", VIP: vip.For(cluster, "", "x")}},
			`service /x: "" is not a valid namespace`},
		{"VIP outside the prefix", []service.Service{{Namespace: "a", Name: "b", VIP: netip.MustParseAddr("2001:db8::1")}},
			`service a/b: VIP 2001:db8::1 is not in fd50:6f64:6d69::/64: derive it with vip.For`},
		{"other cluster", []service.Service{other},
			`service product/cache: VIP ` + other.VIP.String() + ` is not the VIP ` + vip.For(cluster, "product", "cache").String() + ` of cluster "prod": the list belongs to another cluster`},
		{"twice", services([2]string{"a", "b"}, [2]string{"a", "b"}), `service a/b is listed twice: list each Service once`},
	}
	for _, c := range cases {
		err := s.Update(c.in)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.err)
		}
		if !strings.HasPrefix(err.Error(), "service DNS keeps its 1 records") {
			t.Errorf("%s: error %q does not say the records stay", c.name, err)
		}
		if got := s.Services(); len(got) != 1 || got[0] != good[0] {
			t.Errorf("%s: served set changed to %v", c.name, got)
		}
	}
	if got := vipOf(t, query(t, "udp", s.Addr(), good[0].FQDN(), dns.TypeAAAA, false)); got != good[0].VIP {
		t.Errorf("after refused updates: %v", got)
	}
	// The empty list removes every record.
	if err := s.Update(nil); err != nil {
		t.Fatal(err)
	}
	if r := query(t, "udp", s.Addr(), good[0].FQDN(), dns.TypeAAAA, false); r.Rcode != dns.RcodeNameError {
		t.Errorf("after removing every Service: %s", dns.RcodeToString[r.Rcode])
	}
}

// TestTCPPipelinedQueries sends several queries on one TCP connection
// before reading (RFC 7766) and matches every reply by ID.
func TestTCPPipelinedQueries(t *testing.T) {
	s := startServer(t, service.Config{})
	if err := s.Update(services([2]string{"product", "database"}, [2]string{"default", "web"})); err != nil {
		t.Fatal(err)
	}
	c, err := dns.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := map[uint16]netip.Addr{}
	for i, name := range []string{"database.product.svc.cluster.local.", "web.default.svc.cluster.local.", "nothing.default.svc.cluster.local."} {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeAAAA)
		m.Id = uint16(100 + i)
		if err := c.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
		switch i {
		case 0:
			want[m.Id] = vip.For(cluster, "product", "database")
		case 1:
			want[m.Id] = vip.For(cluster, "default", "web")
		default:
			want[m.Id] = netip.Addr{}
		}
	}
	for n := len(want); n > 0; n-- {
		r, err := c.ReadMsg()
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[r.Id]
		if !ok {
			t.Fatalf("reply with unknown ID %d", r.Id)
		}
		delete(want, r.Id)
		if !w.IsValid() {
			if r.Rcode != dns.RcodeNameError {
				t.Errorf("ID %d: %s, want NXDOMAIN", r.Id, dns.RcodeToString[r.Rcode])
			}
			continue
		}
		if got := vipOf(t, r); got != w {
			t.Errorf("ID %d: %v, want %v", r.Id, got, w)
		}
	}
}

// Every response is counted by its code, also the rejections the DNS
// library sends for the server (NOTIMP for another opcode).
func TestAnswersAreCountedByRcode(t *testing.T) {
	s := startServer(t, service.Config{})
	if err := s.Update(services([2]string{"product", "database"})); err != nil {
		t.Fatal(err)
	}
	query(t, "udp", s.Addr(), "database.product.svc.cluster.local.", dns.TypeAAAA, false)
	query(t, "tcp", s.Addr(), "database.product.svc.cluster.local.", dns.TypeAAAA, false)
	query(t, "udp", s.Addr(), "nothing.product.svc.cluster.local.", dns.TypeAAAA, false)
	query(t, "udp", s.Addr(), "example.com.", dns.TypeAAAA, false)
	notify := new(dns.Msg)
	notify.SetQuestion("database.product.svc.cluster.local.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	if r := exchange(t, "udp", s.Addr(), notify); r.Rcode != dns.RcodeNotImplemented {
		t.Fatalf("NOTIFY answered %s", dns.RcodeToString[r.Rcode])
	}
	got := s.Answers()
	want := map[string]uint64{"NOERROR": 2, "NXDOMAIN": 1, "REFUSED": 1, "NOTIMP": 1}
	if len(got) != len(want) {
		t.Fatalf("answers %v, want %v", got, want)
	}
	for code, n := range want {
		if got[code] != n {
			t.Fatalf("answers %v, want %v", got, want)
		}
	}
}
