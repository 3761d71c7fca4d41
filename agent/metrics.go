// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"podmin.dev/podmin/agent/staticpod"
)

// metrics serves the reconciler's counters in the Prometheus text format
// on the loopback health address, for node-local scraping.
type metrics struct {
	rec       interface{ Counters() staticpod.Counters }
	nodegroup string
	// collectors write their own families after the reconciler's (the
	// registry's).
	collectors []interface{ WriteMetrics(w io.Writer) }
}

// ServeHTTP writes the counters.
func (m *metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	c := m.rec.Counters()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	var b strings.Builder
	ng := `nodegroup="` + m.nodegroup + `"`
	counter := func(name, help string, v uint64, labels string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n", name, help, name)
		if labels != "" {
			fmt.Fprintf(&b, "%s{%s} %d\n", name, labels, v)
		}
	}
	counter("podmin_agent_reconcile_passes_total", "Reconcile passes completed.", c.Passes, ng)
	counter("podmin_agent_reconcile_failures_total", "Reconcile passes that failed as a whole.", c.Failures, ng)
	counter("podmin_agent_reconcile_restarts_total", "Passes restarted because the deployment index changed during them.", c.Restarts, ng)
	counter("podmin_agent_pod_failures_total", "Passes that kept a Pod at its last valid state.", 0, "")
	pods := make([]string, 0, len(c.PodFailures))
	for p := range c.PodFailures {
		pods = append(pods, p)
	}
	slices.Sort(pods)
	for _, p := range pods {
		fmt.Fprintf(&b, "podmin_agent_pod_failures_total{%s,pod=%s} %d\n", ng, strconv.Quote(p), c.PodFailures[p])
	}
	for _, c := range m.collectors {
		c.WriteMetrics(&b)
	}
	_, _ = w.Write([]byte(b.String()))
}
