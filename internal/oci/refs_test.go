// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package oci_test

import (
	"strings"
	"testing"

	"podmin.dev/podmin/internal/oci"
)

func TestDestination(t *testing.T) {
	for _, tc := range []struct{ src, dst, want, err string }{
		{"hello:v1", "", "registry.podmin.internal/apps/hello:v1", ""},
		{"hello", "", "registry.podmin.internal/apps/hello:latest", ""},
		{"ghcr.io/example/web:v2", "", "registry.podmin.internal/apps/example/web:v2", ""},
		{"registry.podmin.internal/apps/x/y:1", "", "registry.podmin.internal/apps/x/y:1", ""},
		{"nginx:1.27", "web:v1", "registry.podmin.internal/apps/web:v1", ""},
		{"nginx:1.27", "registry.podmin.internal/apps/web", "registry.podmin.internal/apps/web:latest", ""},
		{"nginx:1.27", "mirror/pause:3.10", "", "mirror/ is reserved"},
		{"nginx:1.27", "registry.podmin.internal/mirror/x/pause:3.10", "", "mirror/ is reserved"},
		{"registry.podmin.internal/mirror/registry.k8s.io/pause:3.10", "", "", "mirror/ is reserved"},
		{"nginx:1.27", "ghcr.io/x/y:v1", "", "not in the cluster registry"},
		{"nginx:1.27", "web@sha256:" + strings.Repeat("a", 64), "", "has a digest"},
		{"nginx:1.27", "Bad:v1", "", "not a valid image reference"},
	} {
		got, err := oci.Destination(tc.src, tc.dst)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Destination(%q, %q) error = %v, want %q", tc.src, tc.dst, err, tc.err)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("Destination(%q, %q) = %s, %v; want %s", tc.src, tc.dst, got, err, tc.want)
		}
	}
}
