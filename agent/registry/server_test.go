// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/agent/registry"
	localstore "podmin.dev/podmin/internal/objstore/local"
)

func TestServerServesLoopback(t *testing.T) {
	ctx := context.Background()
	b := localstore.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := b.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	s := registry.NewServer("127.0.0.1:0", "the registry address", b, slog.New(slog.DiscardHandler))
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, string) {
		resp, err := client.Get("http://" + s.Bound() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/v2/"); code != http.StatusOK {
		t.Fatalf("GET /v2/ = %d", code)
	}
	if code, body := get("/v2/apps/hello/manifests/v1"); code != http.StatusNotFound || !strings.Contains(body, "errors") {
		t.Fatalf("unknown image: %d %s", code, body)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Get("http://" + s.Bound() + "/v2/"); err == nil {
		t.Fatal("the registry still serves after Stop")
	}
}

// The coordinator tells a pull refused by the node's registry from a real
// failure by the address the registry serves at now: none before it
// listens, its bound address while it serves, none once stopped.
func TestServerSaysWhileItServes(t *testing.T) {
	ctx := context.Background()
	b := localstore.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := b.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	var none *registry.Server
	if got := none.Serving(); got != "" {
		t.Fatalf("no registry serves at %q", got)
	}
	s := registry.NewServer("127.0.0.1:0", "the registry address", b, slog.New(slog.DiscardHandler))
	if got := s.Serving(); got != "" {
		t.Fatalf("before it listens: %q", got)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Serving(); got == "" || got != s.Bound() || strings.HasSuffix(got, ":0") {
		t.Fatalf("while it serves: %q (bound %q)", got, s.Bound())
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Serving(); got != "" {
		t.Fatalf("after it stopped: %q", got)
	}
}
