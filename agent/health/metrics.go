// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package health

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
)

// Metrics serves the agent's metrics in the Prometheus text format on the
// loopback health address, for node-local scraping. Each subsystem is one
// source that writes its own families; a subsystem the agent does not run
// writes none. The families are built as Prometheus' data model and
// encoded by its own text encoder (expfmt), so names, help texts and label
// values are escaped as every Prometheus parser expects.
type Metrics struct {
	nodegroup string
	sources   []Source
	now       func() time.Time
}

// Source writes one subsystem's families.
type Source interface {
	WriteMetrics(w *Writer)
}

// NewMetrics serves sources in order, each sample labelled with the
// node's NodeGroup.
func NewMetrics(nodegroup string, sources ...Source) *Metrics {
	return &Metrics{nodegroup: nodegroup, sources: sources, now: time.Now}
}

// Add serves further sources after the others; call it before serving.
func (m *Metrics) Add(sources ...Source) { m.sources = append(m.sources, sources...) }

// ServeHTTP writes every source's families.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	pw := &Writer{nodegroup: m.nodegroup, now: m.now()}
	for _, s := range m.sources {
		s.WriteMetrics(pw)
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

// Writer collects metric families in the order they are written.
// Every sample carries the node's NodeGroup label first.
type Writer struct {
	families  []*dto.MetricFamily
	nodegroup string
	now       time.Time
}

// Family starts a family (typ is counter or gauge); its samples follow.
func (w *Writer) Family(name, typ, help string) {
	t := dto.MetricType_GAUGE
	if typ == "counter" {
		t = dto.MetricType_COUNTER
	}
	w.families = append(w.families, &dto.MetricFamily{Name: proto.String(name), Help: proto.String(help), Type: t.Enum()})
}

// Sample adds one sample to the family last started under name; labels
// are extra key and value pairs (Label).
func (w *Writer) Sample(name string, v float64, labels ...LabelPair) {
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

// One writes a family with a single sample.
func (w *Writer) One(name, typ, help string, v float64) {
	w.Family(name, typ, help)
	w.Sample(name, v)
}

// LabelPair is one label of a sample.
type LabelPair struct{ key, value string }

// Label is one label of a sample.
func Label(key, value string) LabelPair { return LabelPair{key, value} }

// Age is the seconds from t to now, or -1 when t is zero (never).
func (w *Writer) Age(t time.Time) float64 {
	if t.IsZero() {
		return -1
	}
	return w.now.Sub(t).Seconds()
}

// Unix is t in seconds since the epoch, or 0 when t is zero (never).
func Unix(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

// Text is a subsystem that writes its own families in the text
// format (the node registry does): they are parsed with Prometheus' own
// parser, and their samples gain the NodeGroup label every other sample
// carries. A source whose text does not parse is served as one error
// family rather than as broken text.
type Text struct {
	Src interface{ WriteMetrics(w io.Writer) }
}

func (t Text) WriteMetrics(w *Writer) {
	var b strings.Builder
	t.Src.WriteMetrics(&b)
	p := expfmt.NewTextParser(model.LegacyValidation)
	parsed, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		w.One("podmin_agent_metrics_source_errors_total", "counter", "Metric sources whose text could not be parsed: "+err.Error(), 1)
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
