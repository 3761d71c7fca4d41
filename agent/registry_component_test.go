// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

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

// The agent's /metrics carries the registry's counters: the bytes it
// served and the requests it refused, by reason.
func TestMetricsScrapeRegistryCounters(t *testing.T) {
	a := startLocalAgent(t, time.Hour, func(o *Options) { o.RegistryAddr = "127.0.0.1:0" })
	blob := []byte(strings.Repeat("podmin layer ", 1000))
	sum := sha256.Sum256(blob)
	digest := hex.EncodeToString(sum[:])
	if _, err := a.bucket.Put(context.Background(), "apps/hello/blobs/sha256/"+digest, blob); err != nil {
		t.Fatal(err)
	}
	addr := regexp.MustCompile(`msg="serving the read-only registry".* addr=(\S+)`).FindStringSubmatch(a.logs.String())
	if addr == nil {
		t.Fatalf("no registry address in the log:\n%s", a.logs)
	}
	for path, want := range map[string]int{
		"/v2/apps/hello/blobs/sha256:" + digest:                  http.StatusOK,
		"/v2/apps/hello/blobs/sha256:" + strings.Repeat("0", 64): http.StatusNotFound,
	} {
		resp, err := http.Get("http://" + addr[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("GET %s = %d, want %d", path, resp.StatusCode, want)
		}
	}
	// The server counts a body's bytes once it has handed them all to the
	// connection, which may be just after the client has read them.
	wants := []string{
		fmt.Sprintf(`podmin_agent_registry_bytes_served_total{nodegroup="workers",kind="blob"} %d`, len(blob)),
		`podmin_agent_registry_bytes_served_total{nodegroup="workers",kind="manifest"} 0`,
		`podmin_agent_registry_refusals_total{nodegroup="workers",reason="not_found"} 1`,
		`podmin_agent_registry_refusals_total{nodegroup="workers",reason="digest_mismatch"} 0`,
		`podmin_agent_reconcile_passes_total{nodegroup="workers"}`,
	}
	var missing []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, body := a.get(t, "/metrics")
		missing = missing[:0]
		for _, want := range wants {
			if !strings.Contains(body, want) {
				missing = append(missing, want)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %q:\n%s", missing, body)
		}
	}
}
