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

	"podmin.dev/podmin/agent/cri"
	"podmin.dev/podmin/internal/manifest"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/state"
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

// --help is the operator's documentation: it exits 0 and names every
// flag, every environment setting, local node mode and the host paths.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{arg}, func(string) string { return "" }, &out, &errb); code != 0 || errb.Len() != 0 {
			t.Fatalf("%s: exit %d, stderr %q", arg, code, errb.String())
		}
		for _, want := range []string{"--provider", "--bucket", "--region", "--cluster", "--nodegroup", "--ipv6-prefix",
			"PODMIN_ROOT", "PODMIN_AGENT_ONCE", "PODMIN_AGENT_POLL_INTERVAL", "PODMIN_AGENT_HEALTH_ADDR", "PODMIN_AGENT_REGISTRY_ADDR",
			"PODMIN_AGENT_DNS_TTL_MARGIN", "XDG_DATA_HOME", "Local node mode", "/etc/podmin/manifests", "/run/podmin/workloads",
			"/readyz", "/metrics", "default 5s", "PODMIN_AGENT_DNS_ADDR", "PODMIN_AGENT_API_ADDR", "PODMIN_AGENT_NODE_ID",
			"PODMIN_AGENT_NODE_ADDR", "PODMIN_AGENT_DATAPLANE", "127.0.0.1:1053",
			"PODMIN_AGENT_FLUENT_BIT_RESTART", "systemctl restart fluent-bit.service", "/etc/podmin/fluent-bit.yaml",
			"/run/podmin/telemetry/ca.pem", cri.ContainerdSocket} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s does not mention %q:\n%s", arg, want, out.String())
			}
		}
	}
}

// One-shot mode publishes the committed state into the root once and
// exits 0; with a Pod that cannot be published it still publishes the
// rest and exits 1.
func TestOnce(t *testing.T) {
	dir := t.TempDir()
	bucket := filepath.Join(dir, "bucket")
	b := localstore.Open(bucket)
	if err := b.CreateBucket(t.Context()); err != nil {
		t.Fatal(err)
	}
	commit := func(name string) state.Entry {
		data, err := manifest.Build(manifest.BuildOptions{Name: name, NodeGroup: "workers", Images: []string{"hello:v1"}})
		if err != nil {
			t.Fatal(err)
		}
		ex, err := manifest.Extract(data, manifest.ExtractOptions{})
		if err != nil {
			t.Fatal(err)
		}
		k, _ := state.NewKey("workers", name)
		res, err := state.NewCommitter(b, state.CommitOptions{}).Deploy(t.Context(), state.Deployment{Key: k, Namespace: ex.Namespace, Pod: ex.PodYAML})
		if err != nil {
			t.Fatal(err)
		}
		return res.Entry
	}
	commit("web")
	root := filepath.Join(dir, "root")
	env := map[string]string{"PODMIN_ROOT": root, "PODMIN_AGENT_ONCE": "1", "XDG_DATA_HOME": filepath.Join(dir, "data"),
		"PODMIN_AGENT_HEALTH_ADDR": "127.0.0.1:1", "PODMIN_AGENT_REGISTRY_ADDR": "127.0.0.1:1"} // never bound in this mode
	args := []string{"--provider", "local", "--bucket", bucket, "--region", "local", "--cluster", "prod",
		"--nodegroup", "workers", "--ipv6-prefix", "2001:db8:abc:de00:1234::/80"}
	var out, errb bytes.Buffer
	if code := run(t.Context(), args, func(k string) string { return env[k] }, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	web := filepath.Join(root, "etc", "podmin", "manifests", "web.yaml")
	if b, err := os.ReadFile(web); err != nil || !strings.Contains(string(b), "hello:v1") {
		t.Fatalf("web.yaml: %v\n%s", err, b)
	}
	if !strings.Contains(errb.String(), "one reconcile pass done") {
		t.Fatalf("log:\n%s", errb.String())
	}

	e := commit("api")
	if err := os.Remove(filepath.Join(bucket, filepath.FromSlash(e.Pod))); err != nil {
		t.Fatal(err)
	}
	commit("db")
	errb.Reset()
	if code := run(t.Context(), args, func(k string) string { return env[k] }, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "pod api (deployment workers/api)") {
		t.Fatalf("exit %d, want 1 naming api\n%s", code, errb.String())
	}
	if _, err := os.Stat(filepath.Join(root, "etc", "podmin", "manifests", "db.yaml")); err != nil {
		t.Fatalf("db was not published beside the failing api: %v", err)
	}
}
