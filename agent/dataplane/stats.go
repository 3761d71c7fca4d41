// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"podmin.dev/podmin/bpf"
)

// DropReason names why the program dropped a packet, as a metric label.
type DropReason string

// The reasons, in DropReasons order.
const (
	DropNoService       DropReason = "no_service"
	DropNoBackend       DropReason = "no_backend"
	DropNATExhausted    DropReason = "nat_ports_exhausted"
	DropNoFlow          DropReason = "no_flow"
	DropFragment        DropReason = "fragment"
	DropExtensionHeader DropReason = "extension_header"
	DropProtocol        DropReason = "protocol"
	DropTruncated       DropReason = "truncated"
	DropICMPNoFlow      DropReason = "icmp_no_flow"
	DropRewriteFailed   DropReason = "rewrite_failed"
	DropLeaseExpired    DropReason = "lease_expired"
)

var drops = []struct {
	reason DropReason
	slot   uint32
	help   string
}{
	{DropNoService, bpf.StatNoService, "the VIP has no Service on that port and protocol"},
	{DropNoBackend, bpf.StatNoBackend, "a new flow's Service has no ready backend"},
	{DropNATExhausted, bpf.StatNATExhausted, "a new flow found no free source-NAT port towards its backend"},
	{DropNoFlow, bpf.StatNoFlow, "a TCP segment other than SYN belongs to no known flow"},
	{DropFragment, bpf.StatFragment, "an IPv6 fragment to a VIP: a datagram larger than the path MTU (fragments are not supported)"},
	{DropExtensionHeader, bpf.StatExtensionHeader, "an IPv6 extension header before TCP or UDP to a VIP (not supported)"},
	{DropProtocol, bpf.StatProtocol, "a protocol other than TCP, UDP or an ICMPv6 error to a VIP"},
	{DropTruncated, bpf.StatTruncated, "headers cut short, to a VIP"},
	{DropICMPNoFlow, bpf.StatICMPNoFlow, "an ICMPv6 error to a VIP about no known flow"},
	{DropRewriteFailed, bpf.StatRewriteFailed, "the kernel refused to rewrite a packet"},
	{DropLeaseExpired, bpf.StatLeaseExpired, "a new flow while no leader has confirmed the backends for the lease window (also with no agent running)"},
}

// DropReasons lists every drop reason in a stable order.
func DropReasons() []DropReason {
	out := make([]DropReason, len(drops))
	for i, d := range drops {
		out[i] = d.reason
	}
	return out
}

// Help says what a drop reason means, for a metric's help text.
func (r DropReason) Help() string {
	for _, d := range drops {
		if d.reason == r {
			return d.help
		}
	}
	return ""
}

// Stats are the program's counters summed over CPUs, since it was
// loaded. Metrics export them as counters: a drops counter labelled by
// reason (every reason of DropReasons, zeros included) and one labelled by
// backend for NAT port exhaustion.
type Stats struct {
	// NewFlows were assigned a backend and a NAT port.
	NewFlows uint64
	// Forwarded packets went to a backend, Reversed replies to a client.
	Forwarded, Reversed uint64
	// Repaired flows had one of their two entries evicted and rebuilt.
	Repaired uint64
	// ICMPTranslated errors about NATed packets went to the side that
	// sent the packet.
	ICMPTranslated uint64
	// Drops counts dropped packets by reason.
	Drops map[DropReason]uint64
	// Exhausted lists backend ports whose source-NAT ports ran out, the
	// most refused first (at most bpf.NATExhaustedEntries of them, the
	// least recent forgotten).
	Exhausted []Exhaustion
}

// Exhaustion is a backend port that ran out of source-NAT ports.
type Exhaustion struct {
	Backend  netip.AddrPort
	Protocol Protocol
	// Refused counts the new flows refused for want of a port.
	Refused uint64
}

// Stats reads the program's counters.
func (d *Dataplane) Stats() (Stats, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return Stats{}, errors.New("the dataplane is stopped")
	}
	return d.readStats()
}

func (d *Dataplane) readStats() (Stats, error) {
	var v [bpf.StatCount]uint64
	for i := range v {
		var per []uint64
		if err := d.objs.Stats.Lookup(uint32(i), &per); err != nil {
			return Stats{}, fmt.Errorf("read dataplane counters: %w", err)
		}
		for _, n := range per {
			v[i] += n
		}
	}
	s := Stats{
		NewFlows: v[bpf.StatNewFlow], Forwarded: v[bpf.StatForward], Reversed: v[bpf.StatReverse],
		Repaired: v[bpf.StatRepaired], ICMPTranslated: v[bpf.StatICMPTranslated],
		Drops: map[DropReason]uint64{},
	}
	for _, r := range drops {
		s.Drops[r.reason] = v[r.slot]
	}
	var k bpf.VipExhaustedKey
	var n uint64
	it := d.objs.Exhausted.Iterate()
	for it.Next(&k, &n) {
		s.Exhausted = append(s.Exhausted, Exhaustion{
			Backend:  netip.AddrPortFrom(netAddr(k.Backend), port(k.Port)),
			Protocol: Protocol(k.Proto),
			Refused:  n,
		})
	}
	if err := it.Err(); err != nil {
		return Stats{}, fmt.Errorf("read dataplane NAT exhaustion: %w", err)
	}
	slices.SortFunc(s.Exhausted, func(a, b Exhaustion) int {
		return cmp.Or(cmp.Compare(b.Refused, a.Refused), a.Backend.Compare(b.Backend), cmp.Compare(a.Protocol, b.Protocol))
	})
	return s, nil
}

// NATExhaustionWindow is how long a backend port that ran out of NAT
// ports stays in Health's report after its last refused flow was seen.
const NATExhaustionWindow = time.Minute

// exhaustionKey identifies an Exhaustion.
type exhaustionKey struct {
	backend  netip.AddrPort
	protocol Protocol
}

// exhaustionSeen is what Health last saw of a backend port.
type exhaustionSeen struct {
	refused uint64    // total when last seen
	grew    time.Time // when the total last grew
	since   uint64    // total before the window started
}

// Health returns nil, or an error naming the backend ports whose
// source-NAT ports ran out, as seen by this or an earlier call, within
// NATExhaustionWindow; Run passes it to Config.Health after every
// reconciliation. New flows to such a port are refused (never given a
// port the backend may still hold), so the error says what to change.
func (d *Dataplane) Health() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return nil
	}
	s, err := d.readStats()
	if err != nil {
		return err
	}
	now := d.now()
	var recent []string
	for _, e := range s.Exhausted {
		k := exhaustionKey{e.Backend, e.Protocol}
		seen, ok := d.exhaustion[k]
		switch {
		case !ok:
			// First seen: what it refused before this call counts as new.
			seen = exhaustionSeen{refused: e.Refused, grew: now}
		case e.Refused > seen.refused:
			if now.Sub(seen.grew) > NATExhaustionWindow {
				seen.since = seen.refused
			}
			seen.refused, seen.grew = e.Refused, now
		}
		d.exhaustion[k] = seen
		if now.Sub(seen.grew) <= NATExhaustionWindow {
			recent = append(recent, fmt.Sprintf("%d new flows to %v %v", seen.refused-seen.since, e.Backend, e.Protocol))
		}
	}
	if len(recent) == 0 {
		return nil
	}
	return fmt.Errorf("source-NAT ports exhausted within the last %v: refused %s; each backend port has %d NAT ports per node, held by open flows and for the backend's TIME_WAIT after it closes first: spread the load over more backends or nodes, or have clients close first or reuse connections",
		NATExhaustionWindow, strings.Join(recent, ", "), bpf.NATPortMax-bpf.NATPortMin+1)
}
