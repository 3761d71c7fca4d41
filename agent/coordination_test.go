// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/dataplane"
	"podmin.dev/podmin/agent/dataplane/dataplanetest"
	"podmin.dev/podmin/agent/service"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/secrets"
	secretslocal "podmin.dev/podmin/internal/secrets/local"
)

// storeClusterCA stores a cluster CA for cluster demo in the local
// secrets store of dataDir, as setup does.
func storeClusterCA(t *testing.T, dataDir string) {
	t.Helper()
	v, err := pki.GenerateClusterCA(rand.Reader, "demo", time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	name, err := secrets.InternalSecret("demo", secrets.ClusterCA)
	if err != nil {
		t.Fatal(err)
	}
	if err := secretslocal.New(filepath.Join(dataDir, "secrets")).Create(context.Background(), name, secrets.Value(v)); err != nil {
		t.Fatal(err)
	}
}

var dnsServingRE = regexp.MustCompile(`msg="serving service DNS".* addr=(\S+)`)

func aaaa(t *testing.T, addr, name string) ([]netip.Addr, int) {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeAAAA)
	r, _, err := (&dns.Client{Net: "tcp", Timeout: 2 * time.Second}).Exchange(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	var out []netip.Addr
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.AAAA); ok {
			ip, _ := netip.AddrFromSlice(a.AAAA)
			out = append(out, ip)
		}
	}
	return out, r.Rcode
}

// TestNoCASecretsStillPublishesPods: a cluster whose setup stored neither
// the workload CA key nor the cluster CA runs the agent without
// identities and coordination, and it still publishes every Pod and is
// ready.
func TestNoCASecretsStillPublishesPods(t *testing.T) {
	a := startLocalAgent(t, 20*time.Millisecond, func(o *Options) {
		o.DNSAddr, o.APIAddr = "127.0.0.1:0", "[::1]:0"
	})
	commit(t, a.bucket, "web", "hello:v1", true)
	waitFor(t, 10*time.Second, "web.yaml", func() bool { return fileContains(filepath.Join(a.manifests, "web.yaml"), "hello:v1") })
	waitFor(t, 10*time.Second, "readiness", func() bool { code, _ := a.get(t, "/readyz"); return code == http.StatusOK })
	logs := a.logs.String()
	for _, want := range []string{"the cluster has no cluster CA yet", "the cluster has no workload CA key yet"} {
		if !strings.Contains(logs, want) || !strings.Contains(logs, "level=WARN") {
			t.Fatalf("log lacks the warning %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "serving service DNS") {
		t.Fatalf("Service DNS served without coordination:\n%s", logs)
	}
}

// TestClusterCAWithoutWorkloadKey: with the cluster CA but no workload CA
// key, the single agent leads, serves the Service's VIP from its own
// snapshot, and publishes Pods without identities.
func TestClusterCAWithoutWorkloadKey(t *testing.T) {
	if l, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		l.Close()
	}
	a := startLocalAgent(t, 20*time.Millisecond, func(o *Options) {
		o.DNSAddr, o.APIAddr = "127.0.0.1:0", "[::1]:0"
		storeClusterCA(t, o.DataDir)
	})
	commit(t, a.bucket, "web", "hello:v1", true)
	waitFor(t, 10*time.Second, "web.yaml", func() bool { return fileContains(filepath.Join(a.manifests, "web.yaml"), "hello:v1") })
	m := dnsServingRE.FindStringSubmatch(a.logs.String())
	if m == nil {
		t.Fatalf("no Service DNS:\n%s", a.logs)
	}
	want := service.Identity("demo", "default", "web").VIP
	waitFor(t, 20*time.Second, "the web VIP in DNS", func() bool {
		got, rcode := aaaa(t, m[1], "web.default.svc.cluster.local.")
		return rcode == dns.RcodeSuccess && len(got) == 1 && got[0] == want
	})
	if _, rcode := aaaa(t, m[1], "api.default.svc.cluster.local."); rcode != dns.RcodeNameError {
		t.Fatalf("unknown Service rcode %d", rcode)
	}
	waitFor(t, 10*time.Second, "readiness", func() bool { code, _ := a.get(t, "/readyz"); return code == http.StatusOK })
	if logs := a.logs.String(); !strings.Contains(logs, "acquired the lease") || fileContains(filepath.Join(a.manifests, "web.yaml"), "identity-revision") {
		t.Fatalf("want a leader without workload identities:\n%s", logs)
	}
}

// TestServiceDNSPortTakenStillPublishesPods: a DNS address in use is
// reported in /readyz; Pods are still published.
func TestServiceDNSPortTakenStillPublishesPods(t *testing.T) {
	if l, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		l.Close()
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	a := startLocalAgent(t, 20*time.Millisecond, func(o *Options) {
		o.DNSAddr, o.APIAddr = taken.Addr().String(), "[::1]:0"
		storeClusterCA(t, o.DataDir)
	})
	commit(t, a.bucket, "web", "hello:v1", true)
	waitFor(t, 10*time.Second, "web.yaml", func() bool { return fileContains(filepath.Join(a.manifests, "web.yaml"), "hello:v1") })
	code, body := a.get(t, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "service-dns: ") || !strings.Contains(body, EnvDNSAddr) {
		t.Fatalf("readyz %d %q", code, body)
	}
}

func TestCoordinationSettingsFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	o, err := OptionsFromEnv(env(nil))
	if err != nil || o.DNSAddr != service.DefaultAddr || o.Dataplane != DataplaneAuto || o.APIAddr != "" || o.NodeID != "" || o.NodeAddr.IsValid() {
		t.Fatalf("defaults %+v %v", o, err)
	}
	o, err = OptionsFromEnv(env(map[string]string{EnvDNSAddr: "off", EnvAPIAddr: "[::1]:18081", EnvNodeID: "n1",
		EnvNodeAddr: "2600:1f14::1", EnvDataplane: "off"}))
	if err != nil || o.DNSAddr != "" || o.APIAddr != "[::1]:18081" || o.NodeID != "n1" || o.NodeAddr != netip.MustParseAddr("2600:1f14::1") || o.Dataplane != DataplaneOff {
		t.Fatalf("set %+v %v", o, err)
	}
	for v, want := range map[string]time.Duration{"": 0, "2s": 2 * time.Second, "0": -1, "0s": -1} {
		if o, err := OptionsFromEnv(env(map[string]string{EnvDrain: v})); err != nil || o.Drain != want {
			t.Errorf("%s=%q: drain %v, %v; want %v", EnvDrain, v, o.Drain, err, want)
		}
	}
	_, err = OptionsFromEnv(env(map[string]string{EnvDNSAddr: "0.0.0.0:53", EnvAPIAddr: "nowhere", EnvNodeAddr: "fd00::1", EnvDataplane: "maybe", EnvDrain: "11m"}))
	for _, want := range []string{EnvDNSAddr, EnvAPIAddr, EnvNodeAddr, EnvDataplane, EnvDrain} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("invalid %s accepted: %v", want, err)
		}
	}
}

// In local node mode the dataplane can only be programmed with a real node
// address to source-NAT to: PODMIN_AGENT_DATAPLANE=on without one is
// refused at start, saying what to set.
func TestLocalDataplaneNeedsANodeAddress(t *testing.T) {
	cfg := Config{Provider: "local", Bucket: t.TempDir(), Region: "local", Cluster: "demo", NodeGroup: "workers",
		IPv6Prefix: netip.MustParsePrefix("2001:db8:abc:de00:1234::/80")}
	err := Run(context.Background(), cfg, Options{Root: t.TempDir(), Settings: coordinator.Settings{Dataplane: DataplaneOn}})
	if err == nil || !strings.Contains(err.Error(), EnvDataplane+"=on") || !strings.Contains(err.Error(), EnvNodeAddr) {
		t.Fatalf("err %v, want the dataplane refused naming %s", err, EnvNodeAddr)
	}
}

// A dataplane that fails to load is named in /readyz; Pods are still
// published and Service DNS still serves.
func TestDataplaneLoadFailureInReadyz(t *testing.T) {
	if l, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		l.Close()
	}
	load := func(dataplane.Config) (coordinator.Dataplane, error) {
		return nil, errors.New("load program: operation not permitted")
	}
	a := startLocalAgent(t, 20*time.Millisecond, func(o *Options) {
		o.NewDataplane = load
		o.DNSAddr, o.APIAddr, o.Dataplane, o.NodeAddr = "127.0.0.1:0", "[::1]:0", DataplaneOn, netip.MustParseAddr("2600:1f14::1")
		storeClusterCA(t, o.DataDir)
	})
	commit(t, a.bucket, "web", "hello:v1", true)
	waitFor(t, 10*time.Second, "web.yaml", func() bool { return fileContains(filepath.Join(a.manifests, "web.yaml"), "hello:v1") })
	waitFor(t, 10*time.Second, "staticpod ready", func() bool {
		_, body := a.get(t, "/readyz")
		return !strings.Contains(body, "staticpod")
	})
	code, body := a.get(t, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "dataplane: load the eBPF dataplane: load program: operation not permitted") {
		t.Fatalf("readyz %d %q", code, body)
	}
	if !strings.Contains(a.logs.String(), "serving service DNS") {
		t.Fatalf("no Service DNS:\n%s", a.logs)
	}
}

// The dataplane is programmed from the coordinator's view (the VIP and
// ports of every Service) and detached on SIGTERM only after the DNS TTL
// margin, once the coordinator has resigned.
func TestDataplaneFedFromViewAndDetachedLast(t *testing.T) {
	if l, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		l.Close()
	}
	rec := &dataplanetest.Recording{}
	load := func(cfg dataplane.Config) (coordinator.Dataplane, error) {
		if cfg.PodPrefix != netip.MustParsePrefix("2001:db8:abc:de00:1234::/80") {
			t.Errorf("dataplane Pod prefix %s", cfg.PodPrefix)
		}
		return rec, nil
	}
	a := startLocalAgent(t, 20*time.Millisecond, func(o *Options) {
		o.NewDataplane = load
		o.DNSAddr, o.APIAddr, o.Dataplane, o.TTLMargin = "127.0.0.1:0", "[::1]:0", DataplaneOn, 100*time.Millisecond
		o.NodeAddr = netip.MustParseAddr("2600:1f14::1")
		storeClusterCA(t, o.DataDir)
	})
	commit(t, a.bucket, "web", "hello:v1", true)
	vip := service.Identity("demo", "default", "web").VIP
	waitFor(t, 20*time.Second, "web programmed", func() bool {
		s := rec.Last()
		return len(s) == 1 && s[0].Name == "web" && s[0].VIP == vip && len(s[0].Ports) > 0 && len(s[0].Backends) == 0
	})
	waitFor(t, 10*time.Second, "readiness", func() bool { code, _ := a.get(t, "/readyz"); return code == http.StatusOK })
	a.cancel()
	err := <-a.done
	a.done <- err
	if err != nil {
		t.Fatal(err)
	}
	logs := a.logs.String()
	margin := strings.Index(logs, "waiting the DNS TTL margin")
	coord := strings.Index(logs, `msg="component stopped" cluster=demo component=coordinator`)
	dp := strings.Index(logs, `msg="component stopped" cluster=demo component=dataplane`)
	dnsStop := strings.Index(logs, `msg="component stopped" cluster=demo component=service-dns`)
	resigned := strings.Index(logs, "resigned the lease")
	if margin < 0 || !(margin < resigned && resigned < coord && coord < dp && dp < dnsStop) {
		t.Fatalf("shutdown order: margin %d, resigned %d, coordinator %d, dataplane %d, DNS %d\n%s", margin, resigned, coord, dp, dnsStop, logs)
	}
	if !rec.Detached() {
		t.Fatal("the dataplane was not stopped")
	}
}

// In local node mode the dataplane source-NATs to the node address given
// with PODMIN_AGENT_NODE_ADDR (without one, Run refuses the dataplane:
// TestLocalDataplaneNeedsANodeAddress).
func TestLocalDataplaneNodeAddress(t *testing.T) {
	if l, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		l.Close()
	}
	given := netip.MustParseAddr("2001:db8:0:e2e::10")
	got := make(chan netip.Addr, 1)
	load := func(cfg dataplane.Config) (coordinator.Dataplane, error) {
		got <- cfg.NodeAddr
		return &dataplanetest.Recording{}, nil
	}
	a := startLocalAgent(t, 20*time.Millisecond, func(o *Options) {
		o.NewDataplane = load
		o.DNSAddr, o.APIAddr, o.Dataplane, o.NodeAddr = "127.0.0.1:0", "[::1]:0", DataplaneOn, given
		storeClusterCA(t, o.DataDir)
	})
	select {
	case addr := <-got:
		if addr != given {
			t.Errorf("node address %v given: the dataplane NATs to %v", given, addr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no dataplane loaded:\n%s", a.logs.String())
	}
	a.cancel()
	err := <-a.done
	a.done <- err // for the cleanup
}

// An agent the leader refuses (here: a second agent under a live node's
// ID) is not ready, and /readyz says why: its Pods' endpoints are never
// served.
func TestRefusedAgentIsNotReady(t *testing.T) {
	if l, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		l.Close()
	}
	dir := t.TempDir()
	bucket := localstore.Open(filepath.Join(dir, "bucket"))
	if err := bucket.CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	storeClusterCA(t, data)
	cfg := Config{Provider: "local", Bucket: bucket.Dir(), Region: "local", Cluster: "demo", NodeGroup: "workers"}
	start := func(name, prefix string) *localAgent {
		a := &localAgent{bucket: bucket, root: filepath.Join(dir, name), logs: &logBuffer{}}
		c := cfg
		c.IPv6Prefix = netip.MustParsePrefix(prefix)
		a.run(t, context.Background(), c, Options{Root: a.root, HealthAddr: "127.0.0.1:0", PollInterval: 20 * time.Millisecond, DataDir: data, Settings: coordinator.Settings{DNSAddr: "127.0.0.1:0", APIAddr: "[::1]:0", NodeID: "node-1"}})
		return a
	}
	first := start("first", "2001:db8:abc:de00:1::/80")
	waitFor(t, 10*time.Second, "the first agent leads", func() bool { return strings.Contains(first.logs.String(), "acquired the lease") })
	second := start("second", "2001:db8:abc:de00:2::/80")
	waitFor(t, 20*time.Second, "the second agent not ready, saying it is refused", func() bool {
		code, body := second.get(t, "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "coordination identity: the leader node-1 refused this node") &&
			strings.Contains(body, "node ID node-1 is in use by another agent")
	})
	waitFor(t, 10*time.Second, "the first agent ready", func() bool { code, _ := first.get(t, "/readyz"); return code == http.StatusOK })
}
