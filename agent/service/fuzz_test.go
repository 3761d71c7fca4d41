// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// serve runs b through the path a datagram or TCP frame takes in the
// server: the header screen, parsing, and the reply. It returns nil where
// the server stays silent.
func serve(s *Server, b []byte, udp bool) []byte {
	var h dns.Header
	if len(b) < 12 {
		return nil // miekg/dns drops a message without a whole header
	}
	h.Id = uint16(b[0])<<8 | uint16(b[1])
	h.Bits = uint16(b[2])<<8 | uint16(b[3])
	h.Qdcount = uint16(b[4])<<8 | uint16(b[5])
	h.Ancount = uint16(b[6])<<8 | uint16(b[7])
	h.Nscount = uint16(b[8])<<8 | uint16(b[9])
	h.Arcount = uint16(b[10])<<8 | uint16(b[11])
	r := new(dns.Msg)
	switch acceptQuery(h) {
	case dns.MsgIgnore:
		return nil
	case dns.MsgAccept:
		if r.Unpack(b) == nil {
			return s.reply(r, udp)
		}
	}
	// Rejected or unparsable: miekg/dns replies FORMERR or NOTIMP from
	// the header alone, without calling the handler.
	return []byte{}
}

// FuzzQuery feeds arbitrary bytes to the server's query path and checks
// what every reply must satisfy: it parses, answers the query's ID and
// question, fits the UDP limit, and carries nothing but the zone's SOA or
// the VIP of the name asked.
func FuzzQuery(f *testing.F) {
	seed := func(name string, qtype uint16, edit func(*dns.Msg)) {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		if edit != nil {
			edit(m)
		}
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, true)
		f.Add(b, false)
	}
	seed("database.product.svc.cluster.local.", dns.TypeAAAA, nil)
	seed("DATABASE.product.svc.cluster.local.", dns.TypeANY, func(m *dns.Msg) { m.SetEdns0(4096, true) })
	seed("nothing.product.svc.cluster.local.", dns.TypeAAAA, func(m *dns.Msg) { m.SetEdns0(100, false) })
	seed("product.svc.cluster.local.", dns.TypeA, nil)
	seed("svc.cluster.local.", dns.TypeSOA, nil)
	seed("example.com.", dns.TypeAAAA, nil)
	seed(strings.Repeat("a", 63)+"."+strings.Repeat("b", 63)+".svc.cluster.local.", dns.TypeAAAA, nil)
	seed("database.product.svc.cluster.local.", dns.TypeAAAA, func(m *dns.Msg) { m.SetEdns0(1232, false); m.IsEdns0().SetVersion(1) })
	seed("database.product.svc.cluster.local.", dns.TypeAAAA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify })
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 28, 0, 1}, true)
	f.Add([]byte{}, true)

	long := strings.Repeat("n", 63)
	srv := New(Config{MaxUDPPayload: 200})
	if err := srv.Update([]Service{Identity("prod", "product", "database"), Identity("prod", long, long)}); err != nil {
		f.Fatal(err)
	}
	vips := map[string]netip.Addr{}
	for _, s := range srv.Services() {
		vips[s.FQDN()] = s.VIP
	}

	f.Fuzz(func(t *testing.T, b []byte, udp bool) {
		out := serve(srv, b, udp)
		if len(out) == 0 {
			return
		}
		var q, r dns.Msg
		if err := q.Unpack(b); err != nil {
			t.Fatalf("answered an unparsable query")
		}
		if err := r.Unpack(out); err != nil {
			t.Fatalf("reply does not parse: %v", err)
		}
		if r.Id != q.Id || !r.Response {
			t.Fatalf("reply ID %d QR %v to query %d", r.Id, r.Response, q.Id)
		}
		if len(q.Question) != 1 {
			// The header promised a question the bytes did not hold.
			if r.Rcode != dns.RcodeFormatError || len(r.Answer)+len(r.Ns) != 0 {
				t.Fatalf("reply to a query without its question: %v", &r)
			}
			return
		}
		if len(r.Question) != 1 || r.Question[0] != q.Question[0] {
			t.Fatalf("reply question %v, query %v", r.Question, q.Question)
		}
		if udp && len(out) > udpLimit(&q, srv.maxUDP) && !(r.Truncated && len(r.Answer)+len(r.Ns) == 0) {
			t.Fatalf("%d-byte UDP reply over the limit %d", len(out), udpLimit(&q, srv.maxUDP))
		}
		for _, rr := range r.Answer {
			switch rr := rr.(type) {
			case *dns.AAAA:
				got, _ := netip.AddrFromSlice(rr.AAAA)
				if want, ok := vips[strings.ToLower(q.Question[0].Name)]; !ok || got != want || rr.Hdr.Ttl != TTL {
					t.Fatalf("answer %v to %s", rr, q.Question[0].Name)
				}
			case *dns.SOA:
				if rr.Hdr.Name != Zone {
					t.Fatalf("SOA of %s", rr.Hdr.Name)
				}
			default:
				t.Fatalf("unexpected answer %v", rr)
			}
		}
		for _, rr := range r.Ns {
			if soa, ok := rr.(*dns.SOA); !ok || soa.Hdr.Name != Zone {
				t.Fatalf("authority %v", rr)
			}
		}
		if r.Rcode == dns.RcodeSuccess && len(r.Answer) > 0 && !r.Authoritative {
			t.Fatalf("answer without AA")
		}
	})
}
