// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package health

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthEndpoints(t *testing.T) {
	h := NewHealth("staticpod")
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("healthz %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "staticpod: starting: no result yet") {
		t.Fatalf("readyz before the first pass: %d %q", code, body)
	}
	h.Report("staticpod", nil)
	if code, body := get("/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("readyz %d %q", code, body)
	}
	h.Report("staticpod", errors.New("payload does not match its digest"))
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "staticpod: payload does not match its digest") {
		t.Fatalf("readyz %d %q", code, body)
	}
	if err := CheckLoopback("health", "0.0.0.0:8082"); err == nil {
		t.Fatal("accepted a non-loopback health address")
	}
	if err := CheckLoopback("health", "[::1]:8082"); err != nil {
		t.Fatal(err)
	}
}
