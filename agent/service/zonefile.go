// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/miekg/dns"

	"podmin.dev/podmin/internal/paths"
)

// DefaultZonePath is the zone file, below the node root, from which the
// node's CoreDNS answers the cluster domain itself: every Service name,
// and NXDOMAIN with the zone's SOA for every other name in it, also while
// the agent is down (restarting, upgrading).
const DefaultZonePath = "/var/lib/podmin/dns/cluster.local.zone"

// ZoneReload is how often CoreDNS looks for a new serial in the zone file.
const ZoneReload = time.Second

// ErrNotPersisted marks an Update whose records are served but could not
// be written to disk (the durable record set or the zone file CoreDNS
// answers from): match it with errors.Is to report that the node cannot
// persist its state.
var ErrNotPersisted = errors.New("free or repair the node's disk: the next update writes the records again")

// renderZone is the cluster domain's zone with services: the SOA the
// agent's own server gives (at the cluster domain's apex, so that every
// name of the domain is answered) and one AAAA record per Service, in
// the table's order.
func renderZone(services []Service, serial uint32) []byte {
	var b strings.Builder
	b.WriteString("; The cluster domain of this node's cluster, written by podmin-agent for CoreDNS.\n")
	apex := soa(serial)
	apex.Hdr.Name = ClusterDomain + "."
	b.WriteString(apex.String() + "\n")
	for _, s := range services {
		rr := &dns.AAAA{Hdr: dns.RR_Header{Name: s.FQDN(), Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: TTL}, AAAA: s.VIP.AsSlice()}
		b.WriteString(rr.String() + "\n")
	}
	return []byte(b.String())
}

// zoneWriter writes the zone file atomically (mode 0644) with a serial
// above every one it, or an earlier agent, wrote: CoreDNS reloads the
// zone only when its serial changes.
type zoneWriter struct {
	path string
	last uint32
	read bool // last includes the serial of the file found at start
}

func (w *zoneWriter) write(services []Service, serial uint32) error {
	if !w.read {
		w.last, w.read = max(w.last, fileSerial(w.path)), true
	}
	serial = max(serial, w.last+1)
	if err := os.MkdirAll(filepath.Dir(w.path), 0o755); err != nil {
		return fmt.Errorf("create the directory of %s: %w", w.path, err)
	}
	if err := paths.WriteFileAtomic(w.path, renderZone(services, serial), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", w.path, err)
	}
	w.last = serial
	return nil
}

// fileSerial is the SOA serial of the zone file at path, 0 when there is
// none that parses.
func fileSerial(path string) uint32 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	zp := dns.NewZoneParser(strings.NewReader(string(data)), "", path)
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		if s, isSOA := rr.(*dns.SOA); isSOA {
			return s.Serial
		}
	}
	return 0
}
