// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"podmin.dev/podmin/agent/registry"
)

// FuzzRequestPath proves that no request path reaches storage outside the
// image layouts, and that every answer is a known status.
func FuzzRequestPath(f *testing.F) {
	hex64 := strings.Repeat("a", 64)
	for _, s := range []string{
		"/v2/", "/v2/apps/hello/manifests/v1", "/v2/apps/hello/blobs/sha256:" + hex64,
		"/v2/apps/../deployments/manifests/v1", "/v2/apps%2F..%2Ftfstate/manifests/x",
		"/v2/mirror/registry.k8s.io/pause/manifests/3.10", "/v2/mirror/../../x/blobs/sha256:" + hex64,
		"/v2/apps/a/b/c/manifests/sha256:" + hex64, "/v2/apps/hello/manifests/..",
	} {
		f.Add(s)
	}
	objects, _, _ := seeded()
	h := registry.New(objects)
	allowed := map[int]bool{200: true, 206: true, 400: true, 404: true, 405: true, 416: true, 500: true}
	f.Fuzz(func(t *testing.T, p string) {
		u, err := url.Parse("http://registry" + p)
		if err != nil || u.Host != "registry" {
			t.Skip()
		}
		req := &http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}, Host: "registry"}
		req = req.WithContext(t.Context())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !allowed[rec.Code] {
			t.Errorf("GET %q = %d", p, rec.Code)
		}
		for _, k := range objects.take() {
			if !reachable(k) {
				t.Fatalf("GET %q read %q, outside the apps/ and mirror/ layouts", p, k)
			}
		}
	})
}
