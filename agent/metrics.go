// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"

	"podmin.dev/podmin/agent/staticpod"
)

// metrics serves the agent's metrics in the Prometheus text format on the
// loopback health address, for node-local scraping. Each subsystem is one
// source that writes its own families; a subsystem the agent does not run
// writes none. The families are built as Prometheus' data model and
// encoded by its own text encoder (expfmt), so names, help texts and label
// values are escaped as every Prometheus parser expects.
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
	pw := &promWriter{nodegroup: m.nodegroup, now: m.now()}
	for _, s := range m.sources {
		s.writeMetrics(pw)
	}
	var b bytes.Buffer
	for _, f := range pw.families {
		if len(f.Metric) == 0 {
			continue // a family without samples (no Pod failed yet) says nothing
		}
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			http.Error(w, fmt.Sprintf("encode metric family %s: %v", f.GetName(), err), http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
}

// promWriter collects metric families in the order they are written.
// Every sample carries the node's NodeGroup label first.
type promWriter struct {
	families  []*dto.MetricFamily
	nodegroup string
	now       time.Time
}

// family starts a family (typ is counter or gauge); its samples follow.
func (w *promWriter) family(name, typ, help string) {
	t := dto.MetricType_GAUGE
	if typ == "counter" {
		t = dto.MetricType_COUNTER
	}
	w.families = append(w.families, &dto.MetricFamily{Name: proto.String(name), Help: proto.String(help), Type: t.Enum()})
}

// sample adds one sample to the family last started under name; labels
// are extra key and value pairs (label).
func (w *promWriter) sample(name string, v float64, labels ...labelPair) {
	var f *dto.MetricFamily
	if n := len(w.families); n > 0 && w.families[n-1].GetName() == name {
		f = w.families[n-1]
	} else {
		// A sample without its family's HELP and TYPE: untyped.
		f = &dto.MetricFamily{Name: proto.String(name), Type: dto.MetricType_UNTYPED.Enum()}
		w.families = append(w.families, f)
	}
	m := &dto.Metric{Label: []*dto.LabelPair{{Name: proto.String("nodegroup"), Value: proto.String(w.nodegroup)}}}
	for _, l := range labels {
		m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(l.key), Value: proto.String(l.value)})
	}
	switch f.GetType() {
	case dto.MetricType_COUNTER:
		m.Counter = &dto.Counter{Value: proto.Float64(v)}
	case dto.MetricType_GAUGE:
		m.Gauge = &dto.Gauge{Value: proto.Float64(v)}
	default:
		m.Untyped = &dto.Untyped{Value: proto.Float64(v)}
	}
	f.Metric = append(f.Metric, m)
}

// one writes a family with a single sample.
func (w *promWriter) one(name, typ, help string, v float64) {
	w.family(name, typ, help)
	w.sample(name, v)
}

// labelPair is one label of a sample.
type labelPair struct{ key, value string }

// label is one label of a sample.
func label(key, value string) labelPair { return labelPair{key, value} }

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
	w.family("podmin_agent_reconcile_reads_total", "counter", "Passes by what they read to learn the NodeGroup's desired state.")
	for _, how := range []string{staticpod.ReadNone, staticpod.ReadMetadata, staticpod.ReadView, staticpod.ReadIndex} {
		w.sample("podmin_agent_reconcile_reads_total", float64(c.Reads[how]), label("read", how))
	}
	w.one("podmin_agent_reconcile_stale_views_total", "counter", "Passes that found the NodeGroup view not matching the index.", float64(c.StaleViews))
	w.one("podmin_agent_reconcile_last_success_timestamp_seconds", "gauge",
		"When the last pass that published the whole NodeGroup ended, in seconds since the epoch (0: none yet).", unix(c.LastSuccess))
	w.one("podmin_agent_index_age_seconds", "gauge",
		"Seconds since a pass last confirmed that the applied deployment index is the committed one (-1: never).", w.age(c.IndexConfirmed))
}

// textMetrics is a subsystem that writes its own families in the text
// format (the node registry does): they are parsed with Prometheus' own
// parser, and their samples gain the NodeGroup label every other sample
// carries. A source whose text does not parse is served as one error
// family rather than as broken text.
type textMetrics struct {
	src interface{ WriteMetrics(w io.Writer) }
}

func (t textMetrics) writeMetrics(w *promWriter) {
	var b strings.Builder
	t.src.WriteMetrics(&b)
	p := expfmt.NewTextParser(model.LegacyValidation)
	parsed, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		w.one("podmin_agent_metrics_source_errors_total", "counter", "Metric sources whose text could not be parsed: "+err.Error(), 1)
		return
	}
	for _, name := range slices.Sorted(maps.Keys(parsed)) {
		f := parsed[name]
		for _, m := range f.Metric {
			m.Label = append([]*dto.LabelPair{{Name: proto.String("nodegroup"), Value: proto.String(w.nodegroup)}}, m.Label...)
		}
		w.families = append(w.families, f)
	}
}
