// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"path/filepath"
	"strings"
	"testing"

	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/state"
)

// TestReadOtelLogs reads the setting from both published forms: the AWS
// module's variables and the local cluster configuration.
func TestReadOtelLogs(t *testing.T) {
	const value = "endpoint=https://otlp.example.com/v1/logs,mtls=true"
	// The shapes setup publishes (builtins/infra's Vars and the local
	// ClusterConfig), written out: the agent does not import builtins.
	aws := []byte(`{"cluster": "demo", "region": "eu-west-1", "account_id": "123456789012", "bucket": "demo-state",
		"nodegroups": {"workers": {"size": 1, "user_data": "..."}}, "workload_ca_publish": null,
		"otel_logs": "` + value + `", "jool_archives": {}}`)
	local := []byte(`{"version": 1, "cluster": "demo", "provider": "local", "region": "local", "bucket": "demo",
		"nodegroups": [{"name": "workers", "size": 1, "disk_size": 20}], "otel_logs": "` + value + `"}`)
	other := []byte(`{"cluster": "prod", "otel_logs": "` + value + `"}`)
	for name, tc := range map[string]struct {
		doc  []byte
		want string
		err  string
	}{
		"aws":           {doc: aws, want: value},
		"local":         {doc: local, want: value},
		"none":          {},
		"other cluster": {doc: other, err: `belongs to cluster "prod"`},
		"garbage":       {doc: []byte("{"), err: "not valid JSON"},
	} {
		b := localstore.Open(filepath.Join(t.TempDir(), "b"))
		if err := b.CreateBucket(t.Context()); err != nil {
			t.Fatal(err)
		}
		if tc.doc != nil {
			if _, err := b.Put(t.Context(), state.TFVarsPath, tc.doc); err != nil {
				t.Fatal(err)
			}
		}
		got, err := ReadOtelLogs(t.Context(), b, "demo")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q %v, want %q", name, got, err, tc.want)
		}
	}
}
