// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import (
	"encoding/json"
	"testing"

	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/internal/state"
)

// Both shapes setup publishes at tfstate/podmin.auto.tfvars.json (the
// module's variables on AWS, ClusterConfig on a local context) carry the
// settings the agents read through state.ParseClusterSettings.
func TestPublishedConfigurationsCarryTheSharedSettings(t *testing.T) {
	const otel = "endpoint=https://otlp.example.com/v1/logs"
	for name, v := range map[string]any{
		"aws":   infra.Vars{Cluster: "demo", Region: "eu-west-1", OtelLogs: otel},
		"local": ClusterConfig{Version: 1, Cluster: infra.Cluster{ID: "demo", Provider: "local", OtelLogs: otel}},
	} {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		s, err := state.ParseClusterSettings(data)
		if err != nil || s.Cluster != "demo" || s.OtelLogs != otel {
			t.Errorf("%s: %+v, %v; want cluster demo and otel_logs %q", name, s, err, otel)
		}
	}
}
