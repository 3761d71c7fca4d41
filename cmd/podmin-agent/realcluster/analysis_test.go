// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package realcluster

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"
)

// What the client and the samplers record, and what the proofs conclude
// from it. Nothing here reads the clock or the machine, so the rules are
// tested on their own (analysis_rules_test.go).

// Kinds of the client's requests.
const (
	kindVIP  = "new connection to the VIP"
	kindName = "new connection by name"
	kindKeep = "keep-alive request"
	kindPort = "connection from a reused source port"
)

// shot is one request of the client.
type shot struct {
	at      time.Time // sent
	took    time.Duration
	kind    string
	entry   string // the node it entered the cluster through
	sport   int    // the client's source port, 0 when unknown
	pod     string // who answered
	version string
	err     error
	// backend is where the entry node's dataplane sent a failed
	// connection, when its flow could be read.
	backend netip.Addr
}

func (s shot) done() time.Time { return s.at.Add(s.took) }

// tally is what a window of requests came to.
type tally struct {
	sent, failed int
	kinds        map[string][2]int // sent, failed
	failures     []shot
	// gap is the longest time the new connections went without an
	// answer, from gapFrom; keepGap the longest of any keep-alive stream.
	gap, keepGap time.Duration
	gapFrom      time.Time
	versions     map[string]int
	pods         map[string]int
}

// tallyShots counts the requests sent in [from, to).
func tallyShots(shots []shot, from, to time.Time) tally {
	t := tally{kinds: map[string][2]int{}, versions: map[string]int{}, pods: map[string]int{}}
	var answered []shot
	keep := map[string][]shot{}       // answers of each keep-alive stream
	keepEnd := map[string]time.Time{} // when each stream's last request ended
	for _, s := range shots {
		if s.at.Before(from) || !s.at.Before(to) {
			continue
		}
		if s.kind == kindKeep && s.done().After(keepEnd[s.entry]) {
			keepEnd[s.entry] = s.done()
		}
		k := t.kinds[s.kind]
		k[0]++
		t.sent++
		if s.err != nil {
			k[1]++
			t.failed++
			t.failures = append(t.failures, s)
		} else {
			t.versions[s.version]++
			t.pods[s.pod]++
			switch s.kind {
			case kindVIP, kindName:
				answered = append(answered, s)
			case kindKeep:
				keep[s.entry] = append(keep[s.entry], s)
			}
		}
		t.kinds[s.kind] = k
	}
	t.gap, t.gapFrom = longestGap(answered, from, to)
	// A stream ends with its last request: one that stopped (its entry
	// node was lost) is not waiting for answers after it.
	for entry, end := range keepEnd {
		g, _ := longestGap(keep[entry], from, minTime(to, end))
		t.keepGap = max(t.keepGap, g)
	}
	sort.Slice(t.failures, func(i, j int) bool { return t.failures[i].at.Before(t.failures[j].at) })
	return t
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// longestGap is the longest time in [from, to] without an answer among
// answered, and where it began.
func longestGap(answered []shot, from, to time.Time) (time.Duration, time.Time) {
	ends := make([]time.Time, 0, len(answered)+2)
	ends = append(ends, from)
	for _, s := range answered {
		ends = append(ends, s.done())
	}
	slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	ends = append(ends, to)
	var gap time.Duration
	var at time.Time
	for i := 1; i < len(ends); i++ {
		if d := ends[i].Sub(ends[i-1]); d > gap {
			gap, at = d, ends[i-1]
		}
	}
	return gap, at
}

// summary says what the tally came to, with times from origin.
func (t tally) summary(origin time.Time) string {
	var kinds []string
	for k, v := range t.kinds {
		kinds = append(kinds, fmt.Sprintf("%s %d/%d failed", k, v[1], v[0]))
	}
	slices.Sort(kinds)
	s := fmt.Sprintf("%d requests, %d failed (%s); longest time without an answer: new connections %s (from %s), keep-alive %s",
		t.sent, t.failed, strings.Join(kinds, ", "), t.gap.Round(10*time.Millisecond), offset(t.gapFrom, origin), t.keepGap.Round(10*time.Millisecond))
	return s
}

// failureList names the first max failures: when, what, through which
// node from which port, where the node's dataplane sent it (named by
// name) or, when its flow could not be read, how many backends the
// entry node's dataplane held then (from planes), and the error.
func (t tally) failureList(origin time.Time, max int, name func(netip.Addr) string, planes []planeSample) string {
	var out []string
	for i, f := range t.failures {
		if i == max {
			out = append(out, fmt.Sprintf("… %d more", len(t.failures)-max))
			break
		}
		port := "an unknown port"
		if f.sport != 0 {
			port = fmt.Sprintf("port %d", f.sport)
		}
		sent := ""
		if f.backend.IsValid() {
			sent = " sent to " + name(f.backend)
		} else if n, ok := backendsAt(planes, f.entry, f.at); ok {
			sent = fmt.Sprintf(" (no flow to read; %s's dataplane held %d backend(s) then)", f.entry, n)
		}
		out = append(out, fmt.Sprintf("%s %s via %s from %s%s, after %s: %v", offset(f.at, origin), f.kind, f.entry, port, sent,
			f.took.Round(time.Millisecond), f.err))
	}
	return strings.Join(out, "; ")
}

// backendsAt is how many backends node's dataplane held at its last
// readable look at or before t.
func backendsAt(planes []planeSample, node string, t time.Time) (int, bool) {
	n, ok := 0, false
	for _, s := range planes {
		if s.node == node && s.err == nil && !s.at.After(t) {
			n, ok = len(s.backends), true
		}
	}
	return n, ok
}

// backendsOfFailures counts the failures by where the dataplane sent
// them (named by name; "unknown" when their flow could not be read).
func (t tally) backendsOfFailures(name func(netip.Addr) string) string {
	count := map[string]int{}
	for _, f := range t.failures {
		k := "unknown"
		if f.backend.IsValid() {
			k = name(f.backend)
		}
		count[k]++
	}
	var out []string
	for k, n := range count {
		out = append(out, fmt.Sprintf("%d to %s", n, k))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// offset is t as an offset from origin, "+1.23s".
func offset(t, origin time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return fmt.Sprintf("%+.2fs", t.Sub(origin).Seconds())
}

// podState is one Pod as kubelet's Pods API showed it.
type podState struct {
	name, revision, service string
	ip                      netip.Addr
	ready, deleting         bool
}

// round is one look at every node's Pods API, nearly at once: a node
// whose API did not answer has an error instead of Pods.
type round struct {
	at   time.Time
	pods map[string][]podState // by node
	errs map[string]error
}

// serving reports whether node runs a ready Pod of service (one not
// being deleted), and its revision.
func (r round) serving(node, service string) (bool, string) {
	for _, p := range r.pods[node] {
		if p.service == service && p.ready && !p.deleting {
			return true, p.revision
		}
	}
	return false, ""
}

// readyCount counts node's ready Pods of service.
func (r round) readyCount(node, service string) int {
	n := 0
	for _, p := range r.pods[node] {
		if p.service == service && p.ready && !p.deleting {
			n++
		}
	}
	return n
}

// between is the most nodes at once that served no ready Pod of service
// (nodes whose Pods API did not answer count as unknown, not as between),
// when that was first seen and which nodes they were; unknown is the
// most nodes at once whose state could not be read.
type between struct {
	most    int
	at      time.Time
	nodes   []string
	unknown int
	rounds  int
}

// betweenRevisions reads the rounds in [from, to] for nodes.
func betweenRevisions(rounds []round, nodes []string, service string, from, to time.Time) between {
	var b between
	for _, r := range rounds {
		if r.at.Before(from) || r.at.After(to) {
			continue
		}
		b.rounds++
		var out []string
		unknown := 0
		for _, n := range nodes {
			if _, ok := r.errs[n]; ok {
				unknown++
				continue
			}
			if ok, _ := r.serving(n, service); !ok {
				out = append(out, n)
			}
		}
		b.unknown = max(b.unknown, unknown)
		if len(out) > b.most {
			b.most, b.at, b.nodes = len(out), r.at, out
		}
	}
	return b
}

// turnover is how one node went from its old revision to the new one:
// when it last served the old one, when it first served the new one.
type turnover struct {
	node             string
	lastOld, cameNew time.Time
}

// turnovers reads each node's turnover to revision want in [from, to].
func turnovers(rounds []round, nodes []string, service, want string, from, to time.Time) []turnover {
	out := make([]turnover, len(nodes))
	for i, n := range nodes {
		out[i].node = n
		for _, r := range rounds {
			if r.at.Before(from) || r.at.After(to) {
				continue
			}
			ok, rev := r.serving(n, service)
			switch {
			case ok && rev == want && out[i].cameNew.IsZero():
				out[i].cameNew = r.at
			case ok && rev != want && out[i].cameNew.IsZero():
				out[i].lastOld = r.at
			}
		}
	}
	return out
}

// planeSample is one look at one node's dataplane: the backend addresses
// its maps hold.
type planeSample struct {
	at       time.Time
	node     string
	backends []netip.Addr
	err      error
}

// leftEvery is when address a had left every node's dataplane for good
// in [from, to]: for each node, the first readable sample without a after
// the last one with it (gone); zero when some node still held a at its
// last readable sample, or was never read.
func leftEvery(samples []planeSample, nodes []string, a netip.Addr, from, to time.Time) (time.Time, map[string]time.Time) {
	gone := map[string]time.Time{}
	for _, s := range samples {
		if s.err != nil || s.at.Before(from) || s.at.After(to) || !slices.Contains(nodes, s.node) {
			continue
		}
		if slices.Contains(s.backends, a) {
			delete(gone, s.node)
		} else if _, ok := gone[s.node]; !ok {
			gone[s.node] = s.at
		}
	}
	var all time.Time
	for _, n := range nodes {
		g, ok := gone[n]
		if !ok {
			return time.Time{}, gone
		}
		if g.After(all) {
			all = g
		}
	}
	return all, gone
}

// fewestBackends is, per node, the fewest backends of prefixes its
// dataplane held in [from, to], and when.
func fewestBackends(samples []planeSample, prefixes []netip.Prefix, from, to time.Time) map[string]struct {
	n  int
	at time.Time
} {
	out := map[string]struct {
		n  int
		at time.Time
	}{}
	for _, s := range samples {
		if s.err != nil || s.at.Before(from) || s.at.After(to) {
			continue
		}
		n := 0
		for _, b := range s.backends {
			for _, p := range prefixes {
				if p.Contains(b) {
					n++
					break
				}
			}
		}
		if cur, ok := out[s.node]; !ok || n < cur.n {
			out[s.node] = struct {
				n  int
				at time.Time
			}{n, s.at}
		}
	}
	return out
}
