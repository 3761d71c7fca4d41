// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package realcluster

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// A window counts only the requests sent inside it; the longest gap runs
// between answers (from the window's start and to its end), failures do
// not close it, and each keep-alive stream has its own.
func TestTallyShots(t *testing.T) {
	ok := func(s float64, kind, entry string) shot {
		return shot{at: at(s), took: 100 * time.Millisecond, kind: kind, entry: entry, pod: "web-node1", version: "v2"}
	}
	bad := shot{at: at(2), took: time.Second, kind: kindVIP, entry: "node2", sport: 41000, err: errors.New("i/o timeout")}
	shots := []shot{
		ok(-1, kindVIP, "node1"), // before the window
		ok(0.5, kindVIP, "node1"), ok(1, kindName, "node2"), bad, ok(4, kindVIP, "node3"),
		ok(1, kindKeep, "node1"), ok(1.1, kindKeep, "node1"), ok(3.1, kindKeep, "node1"),
		ok(1, kindKeep, "node2"), ok(4.5, kindKeep, "node2"),
		ok(0.2, kindKeep, "node3"), // a stream that stopped early: no gap after it
		ok(9, kindVIP, "node1"),    // after it
	}
	got := tallyShots(shots, at(0), at(5))
	if got.sent != 10 || got.failed != 1 || len(got.failures) != 1 || got.failures[0].entry != "node2" {
		t.Fatalf("sent %d failed %d failures %v", got.sent, got.failed, got.failures)
	}
	// Answers end at 0.6, 1.1 and 4.1: the longest stretch without one
	// is 1.1 → 4.1, across the failure.
	if got.gap != 3*time.Second || !got.gapFrom.Equal(at(1.1)) {
		t.Errorf("gap %s from %s, want 3s from +1.1s", got.gap, got.gapFrom)
	}
	// node2's stream: 1.1 → 4.6.
	if got.keepGap != 3500*time.Millisecond {
		t.Errorf("keep-alive gap %s, want 3.5s", got.keepGap)
	}
	if k := got.kinds[kindVIP]; k != [2]int{3, 1} {
		t.Errorf("VIP kind %v, want 3 sent, 1 failed", k)
	}
	planes := []planeSample{{at: at(1), node: "node2", backends: []netip.Addr{netip.MustParseAddr("2001:db8:1:1::2")}},
		{at: at(3), node: "node2"}}
	list := got.failureList(at(0), 5, func(a netip.Addr) string { return a.String() }, planes)
	for _, want := range []string{"+2.00s", "via node2", "port 41000", "i/o timeout", "node2's dataplane held 1 backend(s) then"} {
		if !strings.Contains(list, want) {
			t.Errorf("failure list %q lacks %q", list, want)
		}
	}
	// No answer at all: the whole window is the gap.
	if g := tallyShots([]shot{bad}, at(0), at(5)); g.gap != 5*time.Second {
		t.Errorf("without answers the gap is %s, want the window's 5s", g.gap)
	}
}

func pod(service, rev string, ready bool) podState {
	return podState{name: service, revision: rev, service: service, ready: ready}
}

// A node is between revisions while it serves no ready Pod of the
// Service (a Pod being deleted does not serve); a node whose Pods API did
// not answer is unknown, never counted as between, and reported apart.
func TestBetweenRevisions(t *testing.T) {
	nodes := []string{"node1", "node2", "node3"}
	deleting := pod("web", "a", true)
	deleting.deleting = true
	rounds := []round{
		{at: at(0), pods: map[string][]podState{"node1": {pod("web", "a", true)}, "node2": {pod("web", "a", true)}, "node3": {pod("web", "a", true)}}},
		{at: at(1), pods: map[string][]podState{"node1": {deleting}, "node2": {pod("web", "a", true)}, "node3": {pod("web", "a", true)}}},
		{at: at(2), pods: map[string][]podState{"node1": {pod("web", "b", false)}, "node2": {pod("other", "x", true)}, "node3": {pod("web", "a", true)}}},
		{at: at(3), pods: map[string][]podState{"node1": {pod("web", "b", true)}, "node3": {pod("web", "a", true)}},
			errs: map[string]error{"node2": errors.New("down")}},
		{at: at(4), pods: map[string][]podState{"node1": {pod("web", "b", true)}, "node2": {pod("web", "b", true)}, "node3": {pod("web", "b", true)}}},
	}
	b := betweenRevisions(rounds, nodes, "web", at(0), at(4))
	if b.most != 2 || !b.at.Equal(at(2)) || strings.Join(b.nodes, ",") != "node1,node2" || b.unknown != 1 || b.rounds != 5 {
		t.Fatalf("%+v, want 2 between (node1, node2) at +2s and 1 unknown", b)
	}
	if b := betweenRevisions(rounds, nodes, "web", at(3), at(4)); b.most != 0 || b.unknown != 1 {
		t.Fatalf("from +3s: %+v, want none between and 1 unknown", b)
	}
	turns := turnovers(rounds, nodes, "web", "b", at(0), at(4))
	want := []turnover{{"node1", at(0), at(3)}, {"node2", at(1), at(4)}, {"node3", at(3), at(4)}}
	for i, w := range want {
		if g := turns[i]; g.node != w.node || !g.lastOld.Equal(w.lastOld) || !g.cameNew.Equal(w.cameNew) {
			t.Errorf("turnover %d: %+v, want %+v", i, g, w)
		}
	}
}

// An address has left every dataplane once each node's latest readable
// look lacks it; one that comes back, or a node never read, keeps it in.
func TestLeftEvery(t *testing.T) {
	a := netip.MustParseAddr("2001:db8:1:3::5")
	other := netip.MustParseAddr("2001:db8:1:1::2")
	s := func(sec float64, node string, b ...netip.Addr) planeSample {
		return planeSample{at: at(sec), node: node, backends: b}
	}
	samples := []planeSample{
		s(0, "node1", a, other), s(0, "node2", a, other),
		s(1, "node1", other), s(1, "node2", a, other),
		s(2, "node1", a), // back again
		{at: at(2), node: "node2", err: errors.New("unreadable")},
		s(3, "node1", other), s(3, "node2", other),
		s(4, "node1", other), s(4, "node2", other),
	}
	left, gone := leftEvery(samples, []string{"node1", "node2"}, a, at(0), at(4))
	if !left.Equal(at(3)) || !gone["node1"].Equal(at(3)) || !gone["node2"].Equal(at(3)) {
		t.Fatalf("left %s (per node %v), want +3s", offset(left, t0), gone)
	}
	if left, _ := leftEvery(samples, []string{"node1", "node2"}, a, at(0), at(2.5)); !left.IsZero() {
		t.Fatalf("by +2.5s node1 held it again: left %s, want not yet", offset(left, t0))
	}
	if left, _ := leftEvery(samples, []string{"node1", "node2", "node3"}, a, at(0), at(4)); !left.IsZero() {
		t.Fatalf("node3 was never read: left %s, want unknown", offset(left, t0))
	}
	few := fewestBackends(samples, []netip.Prefix{netip.MustParsePrefix("2001:db8:1::/48")}, at(0), at(4))
	if few["node1"].n != 1 || few["node2"].n != 1 || !few["node2"].at.Equal(at(3)) {
		t.Fatalf("fewest %v", few)
	}
}
