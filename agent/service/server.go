// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// DefaultAddr is where CoreDNS forwards svc.cluster.local: loopback only.
const DefaultAddr = "127.0.0.1:1053"

// Config configures a Server.
type Config struct {
	// Addr is the UDP and TCP listen address; empty means DefaultAddr.
	// Port 0 picks one free port for both.
	Addr string
	// Cluster, when set, makes Update refuse a VIP that is not the
	// cluster's formula VIP for its Service.
	Cluster string
	// StatePath is the durable copy of the Service identities, written on
	// every Update and read by Start; empty keeps none.
	StatePath string
	// ZonePath is the zone file of the cluster domain (DefaultZonePath
	// beneath the node root) written on every Update, from which the
	// node's CoreDNS answers every name of the domain, also while the
	// agent is down; empty writes none.
	ZonePath string
	// MaxUDPPayload caps UDP responses and is the size advertised to EDNS
	// clients; 0 means DefaultMaxUDPPayload. A response that does not fit
	// is sent truncated (TC set) and the client retries over TCP. Values
	// below 512 are honoured and push every client to TCP.
	MaxUDPPayload uint16
	// Now stamps the SOA serial; nil means time.Now.
	Now func() time.Time
	// Log receives the server's structured log; nil discards it.
	Log *slog.Logger
}

// Server is the authoritative DNS server for svc.cluster.local. Queries
// read the record set through an atomic pointer without locking; Update
// replaces the whole set at once, so a query sees either the old set or
// the new one.
type Server struct {
	cfg    Config
	maxUDP uint16
	log    *slog.Logger
	now    func() time.Time

	records atomic.Pointer[table]
	// update serialises writers, the durable copy and the zone file.
	update sync.Mutex
	zone   zoneWriter

	udp, tcp *dns.Server
	addr     netip.AddrPort
	done     chan error

	// answers counts the responses sent, by response code.
	answers [maxRcode + 1]atomic.Uint64
}

// maxRcode is the highest response code the server sends (BADVERS).
const maxRcode = dns.RcodeBadVers

// New returns a Server with an empty record set; Start restores the durable
// one.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, maxUDP: cfg.MaxUDPPayload, log: cfg.Log, now: cfg.Now, zone: zoneWriter{path: cfg.ZonePath}}
	if s.maxUDP == 0 {
		s.maxUDP = DefaultMaxUDPPayload
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.cfg.Addr == "" {
		s.cfg.Addr = DefaultAddr
	}
	t, _ := newTable("", nil, s.serial())
	s.records.Store(t)
	return s
}

func (s *Server) serial() uint32 { return uint32(s.now().Unix()) }

// Name names the server as an agent component.
func (s *Server) Name() string { return "dns" }

// Update replaces the record set with services, all of them or none: an
// invalid entry leaves the served set as it was. The new set is served at
// once; when writing its durable copy or the zone file fails the error
// (matching ErrNotPersisted) says so and the next Update retries the
// writes.
func (s *Server) Update(services []Service) error {
	s.update.Lock()
	defer s.update.Unlock()
	t, err := newTable(s.cfg.Cluster, services, s.serial())
	if err != nil {
		return fmt.Errorf("service DNS keeps its %d records: %w", len(s.records.Load().services), err)
	}
	if old := s.records.Load(); old != nil && old.serial >= t.serial {
		t.serial = old.serial + 1 // strictly increasing even within a second
	}
	s.records.Store(t)
	var errs []error
	if s.cfg.StatePath != "" {
		if err := save(s.cfg.StatePath, t.services); err != nil {
			errs = append(errs, fmt.Errorf("service DNS serves the %d new records, but a restart would restore older ones: %w: %w", len(t.services), err, ErrNotPersisted))
		}
	}
	if s.cfg.ZonePath != "" {
		if err := s.zone.write(t.services, t.serial); err != nil {
			errs = append(errs, fmt.Errorf("service DNS serves the %d new records, but the node's CoreDNS answers older ones: %w: %w", len(t.services), err, ErrNotPersisted))
		}
	}
	return errors.Join(errs...)
}

// Services returns the served Service identities, sorted by namespace and
// name.
func (s *Server) Services() []Service { return slices.Clone(s.records.Load().services) }

// Addr is the bound address once Start returned.
func (s *Server) Addr() netip.AddrPort { return s.addr }

// Start restores the durable record set and listens on UDP and TCP. A
// missing durable copy means no Services yet; an unreadable or invalid one
// is logged and the server starts empty, to be filled by the next Update.
func (s *Server) Start(ctx context.Context) error {
	if s.cfg.StatePath != "" {
		services, err := load(s.cfg.StatePath)
		if err == nil {
			err = s.Update(services)
		}
		if err != nil {
			s.log.Warn("service DNS starts empty: the durable record set is unusable", "path", s.cfg.StatePath, "err", err)
		} else {
			s.log.Info("service DNS restored", "path", s.cfg.StatePath, "services", len(services))
		}
	}
	pc, l, err := listen(ctx, s.cfg.Addr)
	if err != nil {
		return err
	}
	s.addr = netip.MustParseAddrPort(l.Addr().String())
	// UDPSize is the read buffer: room for any query a client may send.
	s.udp = &dns.Server{PacketConn: pc, Handler: s, UDPSize: 4096, MsgAcceptFunc: s.accept}
	s.tcp = &dns.Server{Listener: l, Handler: s, MsgAcceptFunc: s.accept, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
		IdleTimeout: func() time.Duration { return 10 * time.Second }, MaxTCPQueries: 1000}
	s.done = make(chan error, 2)
	for _, srv := range []*dns.Server{s.udp, s.tcp} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { s.done <- srv.ActivateAndServe() }()
		select {
		case <-started:
		case err := <-s.done:
			_ = s.udp.Shutdown()
			_ = s.tcp.Shutdown()
			return fmt.Errorf("service DNS on %s: %w", s.addr, err)
		}
	}
	s.log.Info("service DNS listening", "addr", s.addr.String(), "services", len(s.records.Load().services))
	return nil
}

// listen binds UDP and TCP on the same address. With port 0 it takes the
// TCP port the kernel picks and retries when UDP already has it.
func listen(ctx context.Context, addr string) (net.PacketConn, net.Listener, error) {
	var lc net.ListenConfig
	for range 20 {
		l, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("service DNS cannot listen on TCP %s: %w", addr, err)
		}
		pc, err := lc.ListenPacket(ctx, "udp", l.Addr().String())
		if err == nil {
			return pc, l, nil
		}
		_ = l.Close()
		_, port, _ := net.SplitHostPort(addr)
		if port != "0" || !errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, fmt.Errorf("service DNS cannot listen on UDP %s: %w", addr, err)
		}
	}
	return nil, nil, fmt.Errorf("service DNS found no port free for both UDP and TCP on %s", addr)
}

// Stop closes both listeners and waits for in-flight queries within ctx.
func (s *Server) Stop(ctx context.Context) error {
	if s.udp == nil {
		return nil
	}
	return errors.Join(s.udp.ShutdownContext(ctx), s.tcp.ShutdownContext(ctx))
}

// accept is acceptQuery counting the rejections the DNS library answers.
func (s *Server) accept(h dns.Header) dns.MsgAcceptAction {
	a := acceptQuery(h)
	switch a {
	case dns.MsgReject:
		s.answers[dns.RcodeFormatError].Add(1)
	case dns.MsgRejectNotImplemented:
		s.answers[dns.RcodeNotImplemented].Add(1)
	}
	return a
}

// Answers returns the responses sent since Start, by response code name
// (NOERROR, NXDOMAIN, REFUSED, ...); codes never sent are left out.
func (s *Server) Answers() map[string]uint64 {
	out := map[string]uint64{}
	for code := range s.answers {
		if n := s.answers[code].Load(); n > 0 {
			out[rcodeName(code)] = n
		}
	}
	return out
}

// rcodeName names a response code. Code 16 is BADVERS in an EDNS answer
// and BADSIG in a TSIG one (miekg/dns names it BADSIG); this server signs
// nothing, so its 16 is always BADVERS.
func rcodeName(code int) string {
	if code == dns.RcodeBadVers {
		return "BADVERS"
	}
	return dns.RcodeToString[code]
}

// acceptQuery screens a message by its header before it is parsed: replies
// are dropped unanswered (answering them could loop between servers or
// amplify spoofed traffic), other opcodes are not implemented, and a query
// must hold one question, no answer or authority records and at most an
// OPT and a signature in the additional section.
func acceptQuery(h dns.Header) dns.MsgAcceptAction {
	const qr = 1 << 15
	if h.Bits&qr != 0 {
		return dns.MsgIgnore
	}
	if opcode := int(h.Bits>>11) & 0xF; opcode != dns.OpcodeQuery {
		return dns.MsgRejectNotImplemented
	}
	if h.Qdcount != 1 || h.Ancount != 0 || h.Nscount != 0 || h.Arcount > 2 {
		return dns.MsgReject
	}
	return dns.MsgAccept
}

// ServeDNS answers one query.
func (s *Server) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	_, isUDP := w.RemoteAddr().(*net.UDPAddr)
	if buf := s.reply(r, isUDP); buf != nil {
		_, _ = w.Write(buf)
	}
}

// reply packs the answer to r. A UDP answer larger than the client may
// receive is replaced by a truncated reply.
func (s *Server) reply(r *dns.Msg, udp bool) []byte {
	m := answer(s.records.Load(), r, s.maxUDP)
	buf, err := m.Pack()
	if err != nil {
		s.log.Warn("service DNS cannot pack a reply", "err", err)
		return nil
	}
	if udp && len(buf) > udpLimit(r, s.maxUDP) {
		if buf, err = truncated(m).Pack(); err != nil {
			s.log.Warn("service DNS cannot pack a truncated reply", "err", err)
			return nil
		}
	}
	if m.Rcode >= 0 && m.Rcode <= maxRcode {
		s.answers[m.Rcode].Add(1)
	}
	return buf
}
