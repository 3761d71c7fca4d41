// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// TestReadOnlyServesTheMounts: /read refuses every path outside the
// identity and secret mounts, also one that climbs out of them.
func TestReadOnlyServesTheMounts(t *testing.T) {
	srv := httptest.NewServer(newMux())
	defer srv.Close()
	for path, want := range map[string]int{
		"/etc/passwd":                             http.StatusForbidden,
		"/var/run/podmin/../../../etc/passwd":     http.StatusForbidden,
		"/var/run/secrets/podmin.dev/tls/../../x": http.StatusForbidden,
		"/var/run/podmin":                         http.StatusForbidden,
		"/var/run/podmin/local/absent":            http.StatusNotFound,
	} {
		resp, err := http.Get(srv.URL + "/read?path=" + url.QueryEscape(path))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

func TestVersionAndFetch(t *testing.T) {
	t.Setenv("HELLO_VERSION", "v7")
	srv := httptest.NewServer(newMux())
	defer srv.Close()
	var h struct{ Version string }
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Version != "v7" {
		t.Fatalf("/ = %+v, %v", h, err)
	}
	resp.Body.Close()
	var f struct {
		Status int
		Body   string
	}
	resp, err = http.Get(srv.URL + "/fetch?url=" + url.QueryEscape(srv.URL+"/healthz"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&f); err != nil || f.Status != http.StatusOK || f.Body != "ok\n" {
		t.Fatalf("/fetch = %+v, %v", f, err)
	}
}
