// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/internal/otellogs"
)

// A restart waits for Fluent Bit's unit to start, and the unit's
// ExecStartPre asks the agent to write the configuration: the agent's
// restart must not hold the configuration lock that request needs.
func TestRestartDoesNotBlockTheStartRequest(t *testing.T) {
	o, err := otellogs.Parse("endpoint=https://otlp.example.com/v1/logs,headers-secret=true")
	if err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int32
	var srv *httptest.Server
	l := NewExport(ExportOptions{Local: true, Cluster: "demo", NodeGroup: "workers", Health: health.NewHealth(),
		Restart: func(ctx context.Context) error {
			// What systemd does: run ExecStartPre, wait for it.
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+FluentBitConfigRoute, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("ExecStartPre: %s", resp.Status)
			}
			return nil
		},
	})
	srv = httptest.NewServer(l)
	defer srv.Close()
	dir := t.TempDir()
	l.setExport(ConfigOptions{Options: o, Path: filepath.Join(dir, "fluent-bit.yaml"),
		Node:  otellogs.Node{Cluster: "demo", NodeGroup: "workers", Hostname: "node-1"},
		Paths: otellogs.Paths{StateDir: filepath.Join(dir, "state")},
		Headers: func(context.Context) ([]byte, error) {
			reads.Add(1)
			return []byte(`{"Authorization": "Bearer s3cr3t-token"}`), nil
		}})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := l.apply(ctx, true, "test"); err != nil {
		t.Fatalf("restart through ExecStartPre: %v", err)
	}
	if n := reads.Load(); n != 2 {
		t.Fatalf("the headers secret was read %d times, want 2 (the agent's write and the unit's start)", n)
	}
	if l.lastFailed() {
		t.Fatal("a successful restart is recorded as failed")
	}
}
