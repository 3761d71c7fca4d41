// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package health

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// hostileSource writes a sample whose label value and help text hold what
// the text format must escape, and registry-style text of its own.
type hostileSource struct{}

func (hostileSource) WriteMetrics(w *Writer) {
	w.Family("podmin_test_hostile", "gauge", "Help with a \\ backslash\nand a newline.")
	w.Sample("podmin_test_hostile", 1, Label("pod", "a\"b\\c\nd é"))
}

// Every sample and help text is escaped as Prometheus' own parser reads it
// back: label values with quotes, backslashes, newlines and non-ASCII.
func TestMetricsEscapeAsPrometheusReadsThem(t *testing.T) {
	m := NewMetrics("work\"ers", hostileSource{})
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v\n%s", err, rec.Body.String())
	}
	f := fams["podmin_test_hostile"]
	if f == nil || f.GetHelp() != "Help with a \\ backslash\nand a newline." || len(f.Metric) != 1 {
		t.Fatalf("family read back: %v", f)
	}
	labels := map[string]string{}
	for _, l := range f.Metric[0].Label {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["nodegroup"] != "work\"ers" || labels["pod"] != "a\"b\\c\nd é" {
		t.Fatalf("labels read back %q", labels)
	}
}
