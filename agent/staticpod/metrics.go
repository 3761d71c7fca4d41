// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"maps"
	"slices"

	"podmin.dev/podmin/agent/health"
)

// WriteMetrics writes the reconciler's families (health.Source).
func (r *Reconciler) WriteMetrics(w *health.Writer) {
	c := r.Counters()
	w.One("podmin_agent_reconcile_passes_total", "counter", "Reconcile passes completed.", float64(c.Passes))
	w.One("podmin_agent_reconcile_failures_total", "counter", "Reconcile passes that failed as a whole.", float64(c.Failures))
	w.One("podmin_agent_reconcile_restarts_total", "counter", "Passes restarted because the deployment index changed during them.", float64(c.Restarts))
	w.Family("podmin_agent_pod_failures_total", "counter", "Passes that kept a Pod at its last valid state.")
	for _, p := range slices.Sorted(maps.Keys(c.PodFailures)) {
		w.Sample("podmin_agent_pod_failures_total", float64(c.PodFailures[p]), health.Label("pod", p))
	}
	w.Family("podmin_agent_reconcile_reads_total", "counter", "Passes by what they read to learn the NodeGroup's desired state.")
	for _, how := range []string{ReadNone, ReadMetadata, ReadView, ReadIndex} {
		w.Sample("podmin_agent_reconcile_reads_total", float64(c.Reads[how]), health.Label("read", how))
	}
	w.One("podmin_agent_reconcile_stale_views_total", "counter", "Passes that found the NodeGroup view not matching the index.", float64(c.StaleViews))
	w.One("podmin_agent_reconcile_last_success_timestamp_seconds", "gauge",
		"When the last pass that published the whole NodeGroup ended, in seconds since the epoch (0: none yet).", health.Unix(c.LastSuccess))
	w.One("podmin_agent_index_age_seconds", "gauge",
		"Seconds since a pass last confirmed that the applied deployment index is the committed one (-1: never).", w.Age(c.IndexConfirmed))
}
