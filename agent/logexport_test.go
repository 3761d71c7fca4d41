// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/telemetry"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/secrets"
	secretslocal "podmin.dev/podmin/internal/secrets/local"
	"podmin.dev/podmin/internal/state"
)

// logAgent is agent.Run on a named local bucket holding a published
// cluster configuration.
type logAgent struct {
	*localAgent
	restarts atomic.Int32
	// failRestarts restarts fail while it is positive.
	failRestarts atomic.Int32
}

const logBucket = "demo-logs"

// startLogAgent publishes tfvars (nil publishes nothing) and objects in
// the cluster bucket, stores the workload CA key, and starts an agent.
func startLogAgent(t *testing.T, tfvars string, objects map[string][]byte, failRestarts ...int32) *logAgent {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	bucket := localstore.Open(filepath.Join(data, "buckets", logBucket))
	ctx := context.Background()
	if err := bucket.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	if tfvars != "" {
		if _, err := bucket.Put(ctx, state.TFVarsPath, []byte(tfvars)); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range objects {
		if _, err := bucket.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	key, err := pki.GenerateWorkloadKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	name, _ := secrets.InternalSecret("demo", secrets.WorkloadCAKey)
	if err := secretslocal.New(filepath.Join(data, "secrets")).Create(ctx, name, secrets.Value(key)); err != nil {
		t.Fatal(err)
	}
	// Without the cluster CA this agent takes no part in the election, so
	// it never creates the workload CA: the elected leader did.
	publishWorkloadCA(t, bucket, key)
	hname, _ := secrets.SystemSecret("demo", secrets.OtelLogsHeaders)
	if err := secretslocal.New(filepath.Join(data, "secrets")).Create(ctx, hname, secrets.Value(`{"Authorization": "Bearer s3cr3t-token"}`)); err != nil {
		t.Fatal(err)
	}
	a := &logAgent{localAgent: &localAgent{bucket: bucket, root: filepath.Join(dir, "root"), logs: &logBuffer{}}}
	for _, n := range failRestarts {
		a.failRestarts.Store(n)
	}
	opts := Options{Root: a.root, HealthAddr: "127.0.0.1:0", PollInterval: 50 * time.Millisecond, DataDir: data,
		Settings: coordinator.Settings{NodeID: "node-1"}, CARefreshInterval: 20 * time.Millisecond,
		RestartFluentBit: func(context.Context) error {
			if a.failRestarts.Add(-1) >= 0 {
				return errors.New("fluent-bit.service: unit not found")
			}
			a.restarts.Add(1)
			return nil
		},
	}
	cfg := Config{Provider: "local", Bucket: logBucket, Region: "local", Cluster: "demo", NodeGroup: "workers",
		IPv6Prefix: netip.MustParsePrefix("2001:db8:abc:de00:1234::/80")}
	a.run(t, ctx, cfg, opts)
	return a
}

func (a *logAgent) path(p string) string { return filepath.Join(a.root, filepath.FromSlash(p)) }

func mode(t *testing.T, p string) fs.FileMode {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

func exporterCA(t *testing.T, name string) []byte {
	t.Helper()
	key, err := pki.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.NewCA(rand.Reader, key, pki.CASpec{CommonName: name, Lifetime: 365 * 24 * time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return pki.EncodeCertPEM(ca.Raw)
}

// TestAgentExportsContainerLogs: with otel-logs mtls=true and a ca= object
// in the cluster bucket, the agent writes the Fluent Bit configuration
// (0600), the CA bundle (0644) and the client-only telemetry leaf (0600),
// restarts Fluent Bit onto them, and keeps the last good bundle when the
// object turns invalid.
func TestAgentExportsContainerLogs(t *testing.T) {
	good := exporterCA(t, "exporter CA")
	a := startLogAgent(t, `{"version": 1, "cluster": "demo", "provider": "local",
		"otel_logs": "endpoint=https://otlp.example.com/v1/logs,mtls=true,ca=s3://`+logBucket+`/otel/ca.pem,headers-secret=true"}`,
		map[string][]byte{"otel/ca.pem": good})
	config := a.path(telemetry.FluentBitConfigPath)
	caFile := a.path(telemetry.Dir + "/ca.pem")
	waitFor(t, 20*time.Second, "the Fluent Bit configuration pinned to a telemetry generation", func() bool {
		return fileContains(config, "tls.crt_file: "+a.path(telemetry.Dir+"/"+telemetry.GenerationsDir)) && a.restarts.Load() >= 1
	})
	if m := mode(t, config); m != 0o600 {
		t.Errorf("configuration mode %v, want 0600", m)
	}
	if got, err := os.ReadFile(caFile); err != nil || !bytes.Equal(got, good) || mode(t, caFile) != 0o644 {
		t.Fatalf("CA bundle: %v (mode %v)", err, mode(t, caFile))
	}
	cfgText, _ := os.ReadFile(config)
	for _, want := range []string{"tls.ca_file: " + caFile, "logs_uri: /v1/logs", "tls.verify: \"on\"", "value: demo", "value: workers", "Authorization Bearer s3cr3t-token"} {
		if !strings.Contains(string(cfgText), want) {
			t.Errorf("configuration lacks %q:\n%s", want, cfgText)
		}
	}
	link, err := os.Readlink(a.path(telemetry.Dir + "/" + telemetry.CurrentLink))
	if err != nil {
		t.Fatal(err)
	}
	gen := filepath.Join(a.path(telemetry.Dir), link)
	for _, f := range []string{telemetry.CertFile, telemetry.KeyFile} {
		if m := mode(t, filepath.Join(gen, f)); m != 0o600 {
			t.Errorf("%s mode %v, want 0600", f, m)
		}
	}
	if !strings.Contains(string(cfgText), "tls.key_file: "+filepath.Join(gen, telemetry.KeyFile)) {
		t.Errorf("the configuration does not name the selected generation %s", gen)
	}
	certPEM, _ := os.ReadFile(filepath.Join(gen, telemetry.CertFile))
	certs, err := pki.ParseCertsPEM(certPEM)
	if err != nil || len(certs) != 1 {
		t.Fatalf("leaf: %v", err)
	}
	leaf := certs[0]
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != "spiffe://demo.podmin.internal/system/otel-logs/node/node-1" {
		t.Errorf("leaf URIs %v", leaf.URIs)
	}
	if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("leaf usages %v, want client-auth only", leaf.ExtKeyUsage)
	}

	if strings.Contains(a.logs.String(), "s3cr3t") {
		t.Error("a header value was logged")
	}

	// An invalid object keeps the last good bundle, names why in /readyz
	// and logs it.
	if _, err := a.bucket.Put(context.Background(), "otel/ca.pem", []byte("<html>503</html>")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the refusal in /readyz", func() bool {
		code, body := a.get(t, "/readyz")
		return code == 503 && strings.Contains(body, "log-export: invalid exporter CA bundle")
	})
	if got, _ := os.ReadFile(caFile); !bytes.Equal(got, good) {
		t.Fatal("an invalid CA object replaced the last good bundle")
	}
	if !strings.Contains(a.logs.String(), "keeping the last good one") {
		t.Error("the refusal was not logged")
	}

	// A new valid bundle is installed and Fluent Bit restarted onto it.
	before := a.restarts.Load()
	next := exporterCA(t, "exporter CA 2")
	if _, err := a.bucket.Put(context.Background(), "otel/ca.pem", next); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the new CA bundle", func() bool {
		got, _ := os.ReadFile(caFile)
		return bytes.Equal(got, next) && a.restarts.Load() > before
	})
	waitFor(t, 10*time.Second, "log export ready again", func() bool {
		_, body := a.get(t, "/readyz")
		return !strings.Contains(body, "log-export")
	})
}

// TestAgentWithoutLogExportWritesNothing: a cluster configuration without
// otel_logs, or none at all, writes no Fluent Bit or telemetry file.
func TestAgentWithoutLogExportWritesNothing(t *testing.T) {
	for name, tfvars := range map[string]string{
		"disabled":         `{"version": 1, "cluster": "demo", "provider": "local", "nodegroups": []}`,
		"no configuration": "",
	} {
		t.Run(name, func(t *testing.T) {
			a := startLogAgent(t, tfvars, map[string][]byte{"otel/ca.pem": exporterCA(t, "exporter CA")})
			waitFor(t, 10*time.Second, "the disabled log", func() bool {
				return strings.Contains(a.logs.String(), "container log export disabled by the cluster configuration")
			})
			// Let the workload identities settle: still nothing appears.
			time.Sleep(200 * time.Millisecond)
			for _, p := range []string{telemetry.FluentBitConfigPath, telemetry.Dir} {
				if _, err := os.Lstat(a.path(p)); !os.IsNotExist(err) {
					t.Errorf("%s exists: %v", p, err)
				}
			}
			if a.restarts.Load() != 0 {
				t.Error("Fluent Bit was restarted")
			}
			if _, body := a.get(t, "/readyz"); strings.Contains(body, "log-export") {
				t.Errorf("/readyz names log export: %s", body)
			}
			if code, body := a.post(t, telemetry.FluentBitConfigRoute); code != 503 || !strings.Contains(body, "not configured") {
				t.Errorf("POST %s without log export = %d %q, want 503", telemetry.FluentBitConfigRoute, code, body)
			}
		})
	}
}

// post POSTs an empty body to the agent's health server.
func (a *logAgent) post(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Post("http://"+a.health+path, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestFluentBitStartRereadsTheHeaders: the request Fluent Bit's unit makes
// before every start (POST /fluent-bit/config) reads the exporter headers
// secret afresh and rewrites the configuration without restarting Fluent
// Bit; the answer never carries a header value.
func TestFluentBitStartRereadsTheHeaders(t *testing.T) {
	a := startLogAgent(t, `{"version": 1, "cluster": "demo", "provider": "local",
		"otel_logs": "endpoint=https://otlp.example.com/v1/logs,headers-secret=true"}`, nil)
	config := a.path(telemetry.FluentBitConfigPath)
	waitFor(t, 20*time.Second, "the first configuration", func() bool {
		return fileContains(config, "Authorization Bearer s3cr3t-token") && a.restarts.Load() == 1
	})
	hname, _ := secrets.SystemSecret("demo", secrets.OtelLogsHeaders)
	store := secretslocal.New(filepath.Join(filepath.Dir(a.root), "data", "secrets"))
	if err := store.Update(t.Context(), hname, secrets.Value(`{"Authorization": "Bearer r0tated-token"}`)); err != nil {
		t.Fatal(err)
	}
	if code, _ := a.get(t, telemetry.FluentBitConfigRoute); code != http.StatusMethodNotAllowed {
		t.Errorf("GET %s = %d, want 405", telemetry.FluentBitConfigRoute, code)
	}
	code, body := a.post(t, telemetry.FluentBitConfigRoute)
	if code != 200 || strings.Contains(body, "token") {
		t.Fatalf("POST %s = %d %q", telemetry.FluentBitConfigRoute, code, body)
	}
	if !fileContains(config, "Authorization Bearer r0tated-token") || fileContains(config, "s3cr3t-token") {
		t.Fatal("the configuration does not carry the rotated header")
	}
	if m := mode(t, config); m != 0o600 {
		t.Errorf("configuration mode %v, want 0600", m)
	}
	if n := a.restarts.Load(); n != 1 {
		t.Errorf("Fluent Bit restarted %d times, want only the first start", n)
	}
	// A headers secret that cannot be used fails the request, so the unit
	// does not start on a stale configuration; the value is not echoed.
	if err := store.Update(t.Context(), hname, secrets.Value(`not json: l3aked-value`)); err != nil {
		t.Fatal(err)
	}
	code, body = a.post(t, telemetry.FluentBitConfigRoute)
	if code != 503 || strings.Contains(body, "l3aked") || strings.Contains(a.logs.String(), "l3aked") {
		t.Fatalf("POST with an invalid headers secret = %d %q", code, body)
	}
}

func TestFluentBitRestartSetting(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvFluentBitRestart {
				return v
			}
			return ""
		}
	}
	if o, err := OptionsFromEnv(env("")); err != nil || o.RestartFluentBit != nil {
		t.Fatalf("default: %v", err)
	}
	if o, err := OptionsFromEnv(env("off")); err != nil || o.RestartFluentBit == nil || o.RestartFluentBit(t.Context()) != nil {
		t.Fatalf("off: %v", err)
	}
	if _, err := OptionsFromEnv(env("   ")); err == nil || !strings.Contains(err.Error(), EnvFluentBitRestart) {
		t.Fatalf("blank command: %v", err)
	}
	o, err := OptionsFromEnv(env("false restart fluent-bit"))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.RestartFluentBit(t.Context()); err == nil || !strings.Contains(err.Error(), "false restart fluent-bit") {
		t.Fatalf("a failing restart command: %v", err)
	}
	o, _ = OptionsFromEnv(env("true"))
	if err := o.RestartFluentBit(t.Context()); err != nil {
		t.Fatalf("a succeeding restart command: %v", err)
	}
}

// TestAgentRetriesAFailedFluentBitRestart: a restart that fails is named
// in /readyz and retried; Pods are published meanwhile.
func TestAgentRetriesAFailedFluentBitRestart(t *testing.T) {
	a := startLogAgent(t, `{"version": 1, "cluster": "demo", "provider": "local",
		"otel_logs": "endpoint=https://otlp.example.com:4318/v1/logs,ca=s3://`+logBucket+`/otel/ca.pem"}`,
		map[string][]byte{"otel/ca.pem": exporterCA(t, "exporter CA")}, 2)
	commit(t, a.bucket, "web", "hello:v1", false)
	waitFor(t, 10*time.Second, "the Pod published", func() bool {
		return fileContains(filepath.Join(a.root, "etc", "podmin", "manifests", "web.yaml"), "hello:v1")
	})
	waitFor(t, 10*time.Second, "the retried restart", func() bool {
		_, body := a.get(t, "/readyz")
		return a.restarts.Load() == 1 && !strings.Contains(body, "log-export")
	})
	if n := strings.Count(a.logs.String(), "fluent-bit not restarted"); n != 2 || !strings.Contains(a.logs.String(), "unit not found") {
		t.Errorf("%d failed restarts logged, want 2", n)
	}
	if mode(t, a.path(telemetry.FluentBitConfigPath)) != 0o600 {
		t.Error("configuration mode")
	}
	if _, err := os.Lstat(a.path(telemetry.Dir + "/" + telemetry.CurrentLink)); !os.IsNotExist(err) {
		t.Errorf("mtls=false issued a telemetry identity: %v", err)
	}
}
