// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/otellogs"
	"podmin.dev/podmin/internal/scrub"
)

func TestWriteConfigKeepsHeadersOutOfLogs(t *testing.T) {
	clk := &clock{now: t0}
	restarts := 0
	id, _, dir := newIdentity(t, clk, &restarts)
	opts, err := otellogs.Parse("endpoint=https://otlp.example.com/v1/logs,mtls=true,headers-secret=true")
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	const token = "Bearer sk-live-0123456789abcdef"
	headers := []byte(`{"Authorization":"` + token + `"}`)
	cfg := ConfigOptions{
		Options: opts, Node: otellogs.Node{Cluster: "prod", NodeGroup: "workers", Hostname: "ip-10-0-0-1"},
		Paths: otellogs.DefaultPaths(), Identity: id, Path: filepath.Join(dir, "fluent-bit.yaml"), Logger: logs.Logger(), Scrub: scrub.New(),
		Headers: func(context.Context) ([]byte, error) { return headers, nil },
	}
	if err := WriteConfig(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "the agent issues it on its next maintenance pass") {
		t.Fatalf("mtls before the first generation: %v", err)
	}
	files, err := id.Maintain(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteConfig(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(cfg.Path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config mode: %v %v", st, err)
	}
	data, _ := os.ReadFile(cfg.Path)
	for _, want := range []string{"- Authorization " + token, "tls.crt_file: " + files.Cert, "tls.key_file: " + files.Key} {
		if !strings.Contains(string(data), want) {
			t.Errorf("configuration lacks %q", want)
		}
	}
	if strings.Contains(string(data), "/current/") {
		t.Error("the configuration follows the link instead of pinning the generation")
	}

	// A value that breaks the rules is refused without being repeated,
	// and a fetch error that quotes it is scrubbed.
	headers = []byte(`{"Authorization":" ` + token + `"}`)
	if err := WriteConfig(t.Context(), cfg); err == nil {
		t.Fatal("a header with surrounding spaces was written")
	}
	cfg.Headers = func(context.Context) ([]byte, error) {
		return nil, errors.New("provider said: bad value " + token)
	}
	err = WriteConfig(t.Context(), cfg)
	if err == nil {
		t.Fatal("a failed fetch wrote a configuration")
	}
	if strings.Contains(logs.String(), "sk-live") || strings.Contains(err.Error(), "sk-live") {
		t.Fatalf("a header value leaked:\nlog: %s\nerror: %v", logs.String(), err)
	}
	if after, _ := os.ReadFile(cfg.Path); string(after) != string(data) {
		t.Fatal("a failed start replaced the last configuration")
	}
}
