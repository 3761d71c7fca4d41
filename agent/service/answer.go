// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service

import (
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// Sizes of UDP responses, in bytes.
const (
	// classicUDPSize is the limit for a client without EDNS (RFC 1035), and
	// the least an EDNS client may advertise (RFC 6891).
	classicUDPSize = 512
	// DefaultMaxUDPPayload is the largest UDP response sent to an EDNS
	// client and the size the server advertises: the DNS Flag Day 2020
	// value, which avoids IP fragmentation on every common path.
	DefaultMaxUDPPayload = 1232
)

// soa is the zone's SOA record for the authority section of negative
// answers. Its minimum field, the negative-caching time, is the TTL.
func soa(serial uint32) *dns.SOA {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: Zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: TTL},
		Ns:      "ns.dns." + ClusterDomain + ".",
		Mbox:    "hostmaster." + ClusterDomain + ".",
		Serial:  serial,
		Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: TTL,
	}
}

// answer builds the reply to r from t. It never fails: every query gets a
// response code that says why it was not answered.
func answer(t *table, r *dns.Msg, maxUDP uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	m.RecursionAvailable = false
	if opt := r.IsEdns0(); opt != nil {
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.SetUDPSize(maxUDP)
		m.Extra = append(m.Extra, o)
		if opt.Version() != 0 {
			m.Authoritative = false
			m.Rcode = dns.RcodeBadVers
			return m
		}
	}
	switch {
	case r.Opcode != dns.OpcodeQuery:
		m.Authoritative = false
		m.Rcode = dns.RcodeNotImplemented
		return m
	case len(r.Question) != 1:
		m.Authoritative = false
		m.Rcode = dns.RcodeFormatError
		return m
	}
	q := r.Question[0]
	name := strings.ToLower(q.Name)
	if q.Qclass != dns.ClassINET || !inZone(name) {
		// Not ours: the server is authoritative for one zone and does not
		// recurse.
		m.Authoritative = false
		m.Rcode = dns.RcodeRefused
		return m
	}
	if q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR {
		m.Authoritative = false
		m.Rcode = dns.RcodeRefused
		return m
	}
	if a, ok := t.names[name]; ok {
		if q.Qtype == dns.TypeAAAA || q.Qtype == dns.TypeANY {
			m.Answer = append(m.Answer, aaaa(q.Name, a))
			return m
		}
		m.Ns = append(m.Ns, soa(t.serial)) // NODATA
		return m
	}
	if name == Zone {
		if q.Qtype == dns.TypeSOA || q.Qtype == dns.TypeANY {
			m.Answer = append(m.Answer, soa(t.serial))
			return m
		}
		m.Ns = append(m.Ns, soa(t.serial))
		return m
	}
	if _, ok := t.namespaces[name]; !ok {
		m.Rcode = dns.RcodeNameError
	}
	m.Ns = append(m.Ns, soa(t.serial))
	return m
}

func aaaa(owner string, a netip.Addr) *dns.AAAA {
	b := a.As16()
	return &dns.AAAA{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: TTL}, AAAA: b[:]}
}

// inZone reports whether the lowercase FQDN name is Zone or below it.
func inZone(name string) bool {
	return name == Zone || (len(name) > len(Zone) && name[len(name)-len(Zone)-1] == '.' && strings.HasSuffix(name, Zone))
}

// udpLimit is the largest UDP response r may receive: 512 bytes without
// EDNS, else the client's advertised size (at least 512), and never more
// than the server's own maximum.
func udpLimit(r *dns.Msg, maxUDP uint16) int {
	limit := classicUDPSize
	if opt := r.IsEdns0(); opt != nil {
		limit = max(int(opt.UDPSize()), classicUDPSize)
	}
	return min(limit, int(maxUDP))
}

// truncated is the reply to send over UDP when m does not fit: the header
// with TC set, the question and the OPT record, so the client retries over
// TCP. Partial answer sets are never sent.
func truncated(m *dns.Msg) *dns.Msg {
	t := m.Copy()
	t.Truncated = true
	t.Answer, t.Ns = nil, nil
	var extra []dns.RR
	for _, rr := range t.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	t.Extra = extra
	return t
}
