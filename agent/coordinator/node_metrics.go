// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"maps"
	"slices"

	"podmin.dev/podmin/agent/dataplane"
	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/agent/service"
)

// MetricSources are the node's coordination metric families: leadership,
// the snapshot in use, Service DNS and the dataplane. A nil Node has none.
func (c *Node) MetricSources() []health.Source {
	if c == nil {
		return nil
	}
	out := []health.Source{coordinatorMetrics{c.coord}}
	if c.dns != nil {
		out = append(out, dnsMetrics{c.dns})
	}
	if c.feed.enabled() {
		out = append(out, dataplaneMetrics{c.feed})
	}
	return out
}

// coordinatorMetrics are leadership and snapshot families.
type coordinatorMetrics struct{ coord *Coordinator }

func (m coordinatorMetrics) WriteMetrics(w *health.Writer) {
	st := m.coord.Status()
	leading := 0.0
	if st.Leading {
		leading = 1
	}
	w.One("podmin_agent_leader", "gauge", "1 while this node leads the cluster's coordination, else 0.", leading)
	w.One("podmin_agent_leader_term", "gauge", "The lease term this node holds or last observed in dns/leader.json.", float64(st.Term))
	w.One("podmin_agent_snapshot_term", "gauge", "Lease term of the Service snapshot in use (0: none yet).", float64(st.Snapshot.GetTerm()))
	w.One("podmin_agent_snapshot_generation", "gauge", "Generation of the Service snapshot in use (0: none yet).", float64(st.Snapshot.GetGeneration()))
	w.One("podmin_agent_snapshot_revision", "gauge", "Revision of the Service snapshot in use (0: none yet).", float64(st.Snapshot.GetRevision()))
	w.One("podmin_agent_snapshot_age_seconds", "gauge",
		"Seconds since a leader last confirmed the Service snapshot in use (-1: never); past 35 its backends are dropped.", w.Age(st.Confirmed))
}

// dnsMetrics count Service DNS responses by code.
type dnsMetrics struct{ dns *service.Server }

func (m dnsMetrics) WriteMetrics(w *health.Writer) {
	w.Family("podmin_agent_dns_answers_total", "counter", "Service DNS responses sent, by response code.")
	answers := m.dns.Answers()
	for _, code := range slices.Sorted(maps.Keys(answers)) {
		w.Sample("podmin_agent_dns_answers_total", float64(answers[code]), health.Label("rcode", code))
	}
}

// dataplaneMetrics are the eBPF program's counters, as the dataplane
// exposes them.
type dataplaneMetrics struct{ feed *dataplaneFeed }

func (m dataplaneMetrics) WriteMetrics(w *health.Writer) {
	s, ok := m.feed.dp.(interface {
		Stats() (dataplane.Stats, error)
	})
	if !ok {
		return
	}
	st, err := s.Stats()
	if err != nil {
		return
	}
	w.Family("podmin_agent_dataplane_packets_total", "counter", "Service packets the eBPF dataplane handled, by result.")
	for _, r := range []struct {
		result string
		n      uint64
	}{
		{"new_flow", st.NewFlows}, {"forwarded", st.Forwarded}, {"reversed", st.Reversed},
		{"repaired", st.Repaired}, {"icmp_translated", st.ICMPTranslated},
	} {
		w.Sample("podmin_agent_dataplane_packets_total", float64(r.n), health.Label("result", r.result))
	}
	w.Family("podmin_agent_dataplane_drops_total", "counter", "Packets the eBPF dataplane dropped, by reason.")
	for _, r := range dataplane.DropReasons() {
		w.Sample("podmin_agent_dataplane_drops_total", float64(st.Drops[r]), health.Label("reason", string(r)))
	}
	w.Family("podmin_agent_dataplane_nat_exhausted_total", "counter", "New flows refused because a backend port had no free source-NAT port, by backend.")
	for _, e := range st.Exhausted {
		w.Sample("podmin_agent_dataplane_nat_exhausted_total", float64(e.Refused),
			health.Label("backend", e.Backend.String()), health.Label("protocol", e.Protocol.String()))
	}
	if l, ok := m.feed.dp.(interface{ LockedMemory() uint64 }); ok {
		w.One("podmin_agent_dataplane_locked_bytes", "gauge", "Kernel memory the dataplane's maps hold.", float64(l.LockedMemory()))
	}
}
