// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry_test

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"podmin.dev/podmin/agent/registry"
)

// The registry counts the body bytes it sends, by kind, and every request
// it refuses or aborts, by reason; every reason is exported, zero
// included.
func TestMetricsCountBytesAndRefusals(t *testing.T) {
	f, manifest, blob := seeded()
	tampered := bytes.Repeat([]byte("podmin layer "), 100_000)
	td := digestOf(tampered)
	f.put("apps/hello/blobs/sha256/"+td[7:], append([]byte{'P'}, tampered[1:]...))
	h := registry.New(f)
	srv := httptest.NewServer(h)
	defer srv.Close()
	base := srv.URL + "/v2/apps/hello/"
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "manifests/v1", 200},
		{"HEAD", "manifests/v1", 200}, // no body: no bytes
		{"GET", "blobs/" + digestOf(blob), 200},
		{"GET", "blobs/" + digestOf(blob), 200},
		{"GET", "blobs/" + digestOf([]byte("missing")), 404},
		{"GET", "manifests/v2", 404},
		{"GET", "blobs/sha256:XYZ", 400},
		{"POST", "blobs/" + digestOf(blob), 405},
		{"GET", "blobs/" + td, 200}, // aborted before its end
		{"HEAD", "blobs/" + td, 500},
		{"GET", "blobs/" + td, 500},
	} {
		if status, _, _ := get(t, c.method, base+c.path); status != c.status {
			t.Fatalf("%s %s = %d, want %d", c.method, c.path, status, c.status)
		}
	}
	var out strings.Builder
	h.WriteMetrics(&out)
	got := out.String()
	for _, want := range []string{
		"# TYPE podmin_agent_registry_bytes_served_total counter",
		fmt.Sprintf(`podmin_agent_registry_bytes_served_total{kind="manifest"} %d`, len(manifest)),
		`podmin_agent_registry_refusals_total{reason="not_found"} 2`,
		`podmin_agent_registry_refusals_total{reason="invalid_request"} 2`,
		`podmin_agent_registry_refusals_total{reason="range_not_satisfiable"} 0`,
		`podmin_agent_registry_refusals_total{reason="digest_mismatch"} 1`,
		`podmin_agent_registry_refusals_total{reason="known_bad"} 2`,
		`podmin_agent_registry_refusals_total{reason="storage_error"} 0`,
		`podmin_agent_registry_refusals_total{reason="cancelled"} 0`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	// The blob bytes: two complete copies and the part of the tampered
	// blob sent before the abort (less than all of it).
	var blobBytes int
	if _, err := fmt.Sscanf(got[strings.Index(got, `{kind="blob"} `):], `{kind="blob"} %d`, &blobBytes); err != nil {
		t.Fatal(err)
	}
	if sent := blobBytes - 2*len(blob); sent < 0 || sent >= len(tampered) {
		t.Fatalf("blob bytes %d: %d of the tampered blob's %d", blobBytes, sent, len(tampered))
	}
}
