// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	localstore "podmin.dev/podmin/internal/objstore/local"
)

func TestRegistryComponentServesLoopback(t *testing.T) {
	ctx := context.Background()
	b := localstore.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := b.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	s := newRegistryServer("127.0.0.1:0", b, slog.New(slog.DiscardHandler))
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, string) {
		resp, err := client.Get("http://" + s.bound + path)
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
	if _, err := client.Get("http://" + s.bound + "/v2/"); err == nil {
		t.Fatal("the registry still serves after Stop")
	}
}

func TestRegistryAddressFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	o, err := OptionsFromEnv(env(nil))
	if err != nil || o.RegistryAddr != "127.0.0.1:5000" {
		t.Fatalf("default %q %v", o.RegistryAddr, err)
	}
	if o, err = OptionsFromEnv(env(map[string]string{EnvRegistryAddr: "off"})); err != nil || o.RegistryAddr != "" {
		t.Fatalf("off: %q %v", o.RegistryAddr, err)
	}
	_, err = OptionsFromEnv(env(map[string]string{EnvRegistryAddr: "0.0.0.0:5000"}))
	if err == nil || !strings.Contains(err.Error(), EnvRegistryAddr+": registry address \"0.0.0.0:5000\" is not a loopback") || strings.Contains(err.Error(), "health") {
		t.Fatalf("a non-loopback registry address: %v, want it named as the registry address", err)
	}
}
