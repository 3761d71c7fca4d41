// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/miekg/dns"

	"podmin.dev/podmin/agent/service"
)

// rawUDP sends b as one datagram and returns the reply, or nil when none
// came within wait.
func rawUDP(t testing.TB, addr netip.AddrPort, b []byte, wait time.Duration) []byte {
	t.Helper()
	c, err := net.Dial("udp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

func packed(t testing.TB, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// malformed are queries a well-behaved resolver never sends, each with
// the reply the server owes it: a response code, or silence (-1) where any
// reply could be used to amplify or loop.
func malformed(t testing.TB) []struct {
	name  string
	b     []byte
	rcode int
} {
	q := func(edit func(m *dns.Msg)) []byte {
		m := new(dns.Msg)
		m.SetQuestion("database.product.svc.cluster.local.", dns.TypeAAAA)
		m.Id = 0x1234
		edit(m)
		return packed(t, m)
	}
	valid := q(func(*dns.Msg) {})
	twoQuestions := q(func(m *dns.Msg) {
		m.Question = append(m.Question, dns.Question{Name: "web.default.svc.cluster.local.", Qtype: dns.TypeAAAA, Qclass: dns.ClassINET})
	})
	noQuestion := q(func(m *dns.Msg) { m.Question = nil })
	response := q(func(m *dns.Msg) { m.Response = true })
	update := q(func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate })
	notify := q(func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify })
	edns1 := q(func(m *dns.Msg) { m.SetEdns0(1232, false); m.IsEdns0().SetVersion(1) })
	chaos := q(func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS })
	// The question name points at itself: a compression loop.
	loop := append(append([]byte{}, valid[:12]...), 0xc0, 12, 0, 28, 0, 1)
	// A label length running past the end of the message.
	overrun := append(append([]byte{}, valid[:12]...), 60, 'a', 'b')
	// The header announces an answer section that is not there.
	ghostAnswer := append([]byte{}, valid...)
	binary.BigEndian.PutUint16(ghostAnswer[6:], 1)
	return []struct {
		name  string
		b     []byte
		rcode int
	}{
		{"shorter than a header", []byte{0x12, 0x34, 0x01}, -1},
		{"empty", nil, -1},
		{"a response", response, -1},
		{"two questions", twoQuestions, dns.RcodeFormatError},
		{"no question", noQuestion, dns.RcodeFormatError},
		{"truncated question", valid[:len(valid)-3], dns.RcodeFormatError},
		{"compression loop", loop, dns.RcodeFormatError},
		{"label past the end", overrun, dns.RcodeFormatError},
		{"answer count without answers", ghostAnswer, dns.RcodeFormatError},
		{"UPDATE", update, dns.RcodeNotImplemented},
		{"NOTIFY", notify, dns.RcodeNotImplemented},
		{"EDNS version 1", edns1, dns.RcodeBadVers},
		{"CHAOS class", chaos, dns.RcodeRefused},
	}
}

func TestMalformedQueriesOverUDP(t *testing.T) {
	s := startServer(t, service.Config{})
	if err := s.Update(services([2]string{"product", "database"})); err != nil {
		t.Fatal(err)
	}
	for _, c := range malformed(t) {
		wait := 2 * time.Second
		if c.rcode < 0 {
			wait = 200 * time.Millisecond // asserting silence
		}
		reply := rawUDP(t, s.Addr(), c.b, wait)
		switch {
		case c.rcode < 0 && reply != nil:
			t.Errorf("%s: want no reply, got %d bytes", c.name, len(reply))
		case c.rcode >= 0 && reply == nil:
			t.Errorf("%s: no reply, want %s", c.name, dns.RcodeToString[c.rcode])
		case c.rcode >= 0:
			var m dns.Msg
			if err := m.Unpack(reply); err != nil {
				t.Errorf("%s: unparsable reply: %v", c.name, err)
				continue
			}
			if m.Id != 0x1234 || !m.Response || m.Rcode != c.rcode || len(m.Answer) != 0 {
				t.Errorf("%s: reply id %#x QR %v rcode %s with %d answers, want id 0x1234 and %s",
					c.name, m.Id, m.Response, dns.RcodeToString[m.Rcode], len(m.Answer), dns.RcodeToString[c.rcode])
			}
		}
	}
	// The server still answers.
	vipOf(t, query(t, "udp", s.Addr(), "database.product.svc.cluster.local.", dns.TypeAAAA, false))
}

func TestMalformedQueriesOverTCP(t *testing.T) {
	s := startServer(t, service.Config{})
	if err := s.Update(services([2]string{"product", "database"})); err != nil {
		t.Fatal(err)
	}
	for _, c := range malformed(t) {
		conn, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		frame := binary.BigEndian.AppendUint16(nil, uint16(len(c.b)))
		if _, err := conn.Write(append(frame, c.b...)); err != nil {
			t.Fatal(err)
		}
		wait := 2 * time.Second
		if c.rcode < 0 {
			wait = 200 * time.Millisecond // asserting silence
		}
		_ = conn.SetReadDeadline(time.Now().Add(wait))
		var n [2]byte
		_, err = io.ReadFull(conn, n[:])
		if c.rcode < 0 {
			// Silence or a closed connection; never an answer.
			if err == nil {
				t.Errorf("%s: want no reply over TCP", c.name)
			}
			conn.Close()
			continue
		}
		if err != nil {
			t.Errorf("%s: no reply over TCP: %v", c.name, err)
			conn.Close()
			continue
		}
		reply := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(conn, reply); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		var m dns.Msg
		if err := m.Unpack(reply); err != nil || m.Rcode != c.rcode || m.Id != 0x1234 {
			t.Errorf("%s over TCP: rcode %s id %#x (%v), want %s", c.name, dns.RcodeToString[m.Rcode], m.Id, err, dns.RcodeToString[c.rcode])
		}
	}
	// A frame longer than the bytes that follow, then a hang-up.
	conn, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = conn.Write([]byte{0x01, 0x00, 0x12, 0x34})
	conn.Close()
	vipOf(t, query(t, "tcp", s.Addr(), "database.product.svc.cluster.local.", dns.TypeAAAA, false))
}

// An answer to an EDNS version the server does not speak is counted as
// BADVERS, the name that code has in EDNS, not BADSIG, its TSIG name.
func TestBadVersCountedByItsName(t *testing.T) {
	s := startServer(t, service.Config{})
	for _, c := range malformed(t) {
		if c.name == "EDNS version 1" {
			if reply := rawUDP(t, s.Addr(), c.b, 2*time.Second); reply == nil {
				t.Fatal("no answer to an EDNS version 1 query")
			}
		}
	}
	got := s.Answers()
	if got["BADVERS"] != 1 || got["BADSIG"] != 0 {
		t.Fatalf("answers by code %v, want one BADVERS", got)
	}
}
