// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"podmin.dev/podmin/agent/staticpod"
)

// metrics serves the agent's metrics in the Prometheus text format on the
// loopback health address, for node-local scraping. Each subsystem is one
// source that writes its own families; a subsystem the agent does not run
// writes none.
type metrics struct {
	nodegroup string
	sources   []metricSource
	now       func() time.Time
}

// metricSource writes one subsystem's families.
type metricSource interface {
	writeMetrics(w *promWriter)
}

// newMetrics serves sources in order. The sources are: the reconciler
// (reconcileMetrics), coordination (coordination.metricSources: leader,
// snapshot, Service DNS, dataplane) and the node registry
// (textMetrics over its own writer).
func newMetrics(nodegroup string, sources ...metricSource) *metrics {
	return &metrics{nodegroup: nodegroup, sources: sources, now: time.Now}
}

// ServeHTTP writes every source's families.
func (m *metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	pw := &promWriter{nodegroup: `nodegroup=` + strconv.Quote(m.nodegroup), now: m.now()}
	for _, s := range m.sources {
		s.writeMetrics(pw)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(pw.b.String()))
}

// promWriter writes the text format. Every sample carries the node's
// NodeGroup label first.
type promWriter struct {
	b         strings.Builder
	nodegroup string
	now       time.Time
}

// family writes a family's HELP and TYPE lines (typ is counter or gauge).
func (w *promWriter) family(name, typ, help string) {
	fmt.Fprintf(&w.b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// sample writes one sample; labels are extra `key="value"` pairs.
func (w *promWriter) sample(name string, v float64, labels ...string) {
	fmt.Fprintf(&w.b, "%s{%s} %s\n", name, strings.Join(append([]string{w.nodegroup}, labels...), ","), strconv.FormatFloat(v, 'f', -1, 64))
}

// one writes a family with a single sample.
func (w *promWriter) one(name, typ, help string, v float64) {
	w.family(name, typ, help)
	w.sample(name, v)
}

// label is one `key="value"` pair.
func label(key, value string) string { return key + "=" + strconv.Quote(value) }

// age is the seconds from t to now, or -1 when t is zero (never).
func (w *promWriter) age(t time.Time) float64 {
	if t.IsZero() {
		return -1
	}
	return w.now.Sub(t).Seconds()
}

// unix is t in seconds since the epoch, or 0 when t is zero (never).
func unix(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

// reconcileMetrics are the static-Pod reconciler's families.
type reconcileMetrics struct {
	rec interface{ Counters() staticpod.Counters }
}

func (r reconcileMetrics) writeMetrics(w *promWriter) {
	c := r.rec.Counters()
	w.one("podmin_agent_reconcile_passes_total", "counter", "Reconcile passes completed.", float64(c.Passes))
	w.one("podmin_agent_reconcile_failures_total", "counter", "Reconcile passes that failed as a whole.", float64(c.Failures))
	w.one("podmin_agent_reconcile_restarts_total", "counter", "Passes restarted because the deployment index changed during them.", float64(c.Restarts))
	w.family("podmin_agent_pod_failures_total", "counter", "Passes that kept a Pod at its last valid state.")
	for _, p := range slices.Sorted(maps.Keys(c.PodFailures)) {
		w.sample("podmin_agent_pod_failures_total", float64(c.PodFailures[p]), label("pod", p))
	}
	w.one("podmin_agent_reconcile_last_success_timestamp_seconds", "gauge",
		"When the last pass that published the whole NodeGroup ended, in seconds since the epoch (0: none yet).", unix(c.LastSuccess))
	w.one("podmin_agent_index_age_seconds", "gauge",
		"Seconds since a pass last confirmed that the applied deployment index is the committed one (-1: never).", w.age(c.IndexConfirmed))
}

// textMetrics is a subsystem that writes its own families in the text
// format (the node registry does): its samples gain the NodeGroup label
// every other sample carries.
type textMetrics struct {
	src interface{ WriteMetrics(w io.Writer) }
}

func (t textMetrics) writeMetrics(w *promWriter) {
	var b strings.Builder
	t.src.WriteMetrics(&b)
	for line := range strings.Lines(b.String()) {
		if strings.HasPrefix(line, "#") {
			w.b.WriteString(line)
			continue
		}
		name, rest, labelled := strings.Cut(line, "{")
		if labelled {
			w.b.WriteString(name + "{" + w.nodegroup + "," + rest)
			continue
		}
		name, value, _ := strings.Cut(line, " ")
		w.b.WriteString(name + "{" + w.nodegroup + "} " + value)
	}
}
