// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets a test re-run this binary as podmin-agent, so the
// end-to-end tests run, signal and kill real agent processes.
func TestMain(m *testing.M) {
	if os.Getenv("PODMIN_AGENT_TEST_RUN_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func TestAgentFlags(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{
		"PODMIN_ROOT": filepath.Join(dir, "root"), "PODMIN_AGENT_HEALTH_ADDR": "127.0.0.1:0", "PODMIN_AGENT_REGISTRY_ADDR": "127.0.0.1:0",
		"PODMIN_AGENT_DNS_TTL_MARGIN": "0s", "XDG_DATA_HOME": filepath.Join(dir, "data"),
	}
	getenv := func(k string) string { return env[k] }
	valid := []string{"--provider", "local", "--bucket", filepath.Join(dir, "bucket"), "--region", "local", "--cluster", "prod",
		"--nodegroup", "workers", "--ipv6-prefix", "2001:db8:abc:de00:1234::/80"}
	tests := []struct {
		name    string
		args    []string
		code    int
		wantErr string
	}{
		{"valid", valid, 0, "configuration valid"},
		{"no flags", nil, 1, "--bucket is required"},
		{"bad prefix", append(append([]string{}, valid[:10]...), "--ipv6-prefix", "2600:1f14::/64"), 1, "is a /64, not a /80"},
		{"bad nodegroup", append(append([]string{}, valid[:8]...), "--nodegroup", "Workers", "--ipv6-prefix", "2001:db8:abc:de00:1234::/80"), 1, "--nodegroup: invalid NodeGroup ID"},
		{"local region", append(append([]string{}, valid[:4]...), "--region", "us-west-2", "--cluster", "prod", "--nodegroup", "workers", "--ipv6-prefix", "2001:db8:abc:de00:1234::/80"), 1, `is not a region of the local provider`},
		{"unknown flag", append([]string{"--listen", ":80"}, valid...), 2, "flag provided but not defined: -listen"},
		{"positional", append(valid, "extra"), 2, "takes no arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A context that has already ended: a valid agent starts and
			// shuts down at once.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var out, errb bytes.Buffer
			code := run(ctx, tc.args, getenv, &out, &errb)
			if code != tc.code || !strings.Contains(errb.String(), tc.wantErr) {
				t.Fatalf("exit %d (want %d), stderr:\n%s\nwant %q", code, tc.code, errb.String(), tc.wantErr)
			}
		})
	}
	bad := map[string]string{"PODMIN_ROOT": "relative", "PODMIN_AGENT_HEALTH_ADDR": "0.0.0.0:8082", "PODMIN_AGENT_POLL_INTERVAL": "soon"}
	var errb bytes.Buffer
	if code := run(context.Background(), valid, func(k string) string { return bad[k] }, &errb, &errb); code != 1 ||
		!strings.Contains(errb.String(), "PODMIN_ROOT") || !strings.Contains(errb.String(), "not a loopback IP") || !strings.Contains(errb.String(), "PODMIN_AGENT_POLL_INTERVAL") {
		t.Fatalf("bad environment: exit %d\n%s", code, errb.String())
	}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"--version"}, getenv, &out, &out); code != 0 || !strings.HasPrefix(out.String(), "podmin-agent ") {
		t.Fatalf("--version: %d %q", code, out.String())
	}
}
