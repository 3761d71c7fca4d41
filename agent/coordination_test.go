// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/dataplane"
	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/secrets"
	secretslocal "podmin.dev/podmin/internal/secrets/local"
	"podmin.dev/podmin/internal/state"
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
	if code != http.StatusServiceUnavailable || !strings.Contains(body, componentDNS+": ") || !strings.Contains(body, EnvDNSAddr) {
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
	err := Run(context.Background(), cfg, Options{Root: t.TempDir(), Dataplane: DataplaneOn})
	if err == nil || !strings.Contains(err.Error(), EnvDataplane+"=on") || !strings.Contains(err.Error(), EnvNodeAddr) {
		t.Fatalf("err %v, want the dataplane refused naming %s", err, EnvNodeAddr)
	}
}

func TestDataplaneWanted(t *testing.T) {
	local := Config{Provider: "local"}
	if ok, why := dataplaneWanted(local, Options{Dataplane: DataplaneAuto}); ok || !strings.Contains(why, EnvDataplane) {
		t.Fatalf("local node mode loads the dataplane by default: %v %q", ok, why)
	}
	if ok, _ := dataplaneWanted(local, Options{Dataplane: DataplaneOn}); !ok {
		t.Fatal("on is ignored")
	}
	if ok, _ := dataplaneWanted(Config{Provider: "aws"}, Options{Dataplane: DataplaneOff}); ok {
		t.Fatal("off is ignored")
	}
}

// The dataplane receives every Service of the view with its VIP, the
// ports of its payload and exactly the view's ready backends.
func TestDataplaneServicesFromView(t *testing.T) {
	dir := t.TempDir()
	b := localstore.Open(filepath.Join(dir, "bucket"))
	if err := b.CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	commit(t, b, "web", "hello:v1", true)
	f := newDataplaneFeed(Config{Cluster: "demo", Provider: "local"}, Options{Dataplane: DataplaneOff}, b, netip.Addr{}, health.NewHealth(), slog.New(slog.DiscardHandler))
	v := &pb.ServiceSnapshot{Services: []*pb.Service{
		{Namespace: "default", Name: "web", Endpoints: []*pb.Endpoint{{Address: "2001:db8:0:1:1::5", NodeId: "a"}, {Address: "2001:db8:0:1:2::7", NodeId: "b"}}},
		{Namespace: "default", Name: "gone"},
	}}
	got, bad, err := f.services(context.Background(), v)
	if err != nil || bad != nil {
		t.Fatal(err, bad)
	}
	if len(got) != 1 {
		t.Fatalf("services %+v", got)
	}
	s := got[0]
	if s.Namespace != "default" || s.Name != "web" || s.VIP != service.Identity("demo", "default", "web").VIP ||
		len(s.Ports) == 0 || s.Ports[0].Protocol != dataplane.TCP || s.Ports[0].Port == 0 ||
		len(s.Backends) != 2 || s.Backends[0] != netip.MustParseAddr("2001:db8:0:1:1::5") || s.Backends[1] != netip.MustParseAddr("2001:db8:0:1:2::7") {
		t.Fatalf("service %+v", s)
	}
	if len(f.ports) != 1 {
		t.Fatalf("payload ports not cached: %v", f.ports)
	}
}

// commitPorts deploys name with a Service on the given SERVICE:TARGET ports
// and returns its index entry.
func commitPorts(t *testing.T, b objstore.Store, name string, ports ...string) state.Entry {
	t.Helper()
	data, err := manifest.Build(manifest.BuildOptions{Name: name, NodeGroup: "workers", Images: []string{name + ":v1"}, Service: true, Ports: ports})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := manifest.Extract(data, manifest.ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := state.NewKey("workers", name)
	res, err := state.NewCommitter(b, state.CommitOptions{}).Deploy(context.Background(), state.Deployment{Key: k, Namespace: ex.Namespace,
		Pod: ex.PodYAML, ServiceName: ex.Service.Name, Service: ex.ServiceYAML})
	if err != nil {
		t.Fatal(err)
	}
	return res.Entry
}

// One bad Service payload never blocks the dataplane: the other Services
// are programmed, the bad one keeps the ports last programmed for it (or
// is left out if it never had any), and /readyz names it.
func TestOneBadServicePayloadNeverBlocksTheDataplane(t *testing.T) {
	b := localstore.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := b.CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	commitPorts(t, b, "web", "443:8443")
	commitPorts(t, b, "api", "80:8080")
	health := health.NewHealth()
	f := newDataplaneFeed(Config{Cluster: "demo", Provider: "local"}, Options{Dataplane: DataplaneOff}, b, netip.Addr{}, health, slog.New(slog.DiscardHandler))
	rec := &recordingDataplane{}
	f.dp = rec
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	view := func(names ...string) *pb.ServiceSnapshot {
		v := &pb.ServiceSnapshot{}
		for _, n := range names {
			v.Services = append(v.Services, &pb.Service{Namespace: "default", Name: n, Endpoints: []*pb.Endpoint{{Address: "2001:db8:0:1:1::5"}}})
		}
		return v
	}
	ports := func(svcs []dataplane.Service) map[string]uint16 {
		out := map[string]uint16{}
		for _, s := range svcs {
			out[s.Name] = s.Ports[0].Port
		}
		return out
	}
	f.setView(view("web", "api"), false)
	waitFor(t, 10*time.Second, "web and api programmed", func() bool { return len(rec.last()) == 2 })

	// api's new payload is corrupt; db's only payload is too.
	corrupt := func(e state.Entry) {
		if err := os.WriteFile(filepath.Join(b.Dir(), filepath.FromSlash(e.Service)), []byte("kind: Service\ngarbage: ["), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	corrupt(commitPorts(t, b, "api", "81:8081"))
	corrupt(commitPorts(t, b, "db", "5432:5432"))
	commitPorts(t, b, "web", "444:8444")
	f.setView(view("web", "api", "db"), false)
	waitFor(t, 10*time.Second, "web's new port programmed beside the bad Services", func() bool { return ports(rec.last())["web"] == 444 })
	got := ports(rec.last())
	if len(got) != 2 || got["api"] != 80 {
		t.Fatalf("programmed %v, want web on its new port and api on its last good one, db left out", got)
	}
	_, reasons := health.Ready()
	joined := strings.Join(reasons, "\n")
	if !strings.Contains(joined, "Service default/api") || !strings.Contains(joined, "Service default/db") || strings.Contains(joined, "default/web") {
		t.Fatalf("readiness %q, want api and db named", reasons)
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
	saved := newDataplane
	newDataplane = func(dataplane.Config) (programmer, error) {
		return nil, errors.New("load program: operation not permitted")
	}
	t.Cleanup(func() { newDataplane = saved })
	a := startLocalAgent(t, 20*time.Millisecond, func(o *Options) {
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

// recordingDataplane stands in for the kernel dataplane.
type recordingDataplane struct {
	mu       sync.Mutex
	applied  [][]dataplane.Service
	refresh  int
	detached bool
	// inherited is what Inherited reports; renewed records Renew.
	inherited      bool
	inheritedUntil time.Time
	renewed        []time.Time
	pinProblem     error
	// fail, when set, is what Apply returns.
	fail error
}

func (r *recordingDataplane) Renew(until time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.renewed = append(r.renewed, until)
	return nil
}

func (r *recordingDataplane) Inherited() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inheritedUntil, r.inherited
}

func (r *recordingDataplane) PinProblem() error { return r.pinProblem }

func (r *recordingDataplane) applies() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.applied)
}

func (r *recordingDataplane) renewals() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.renewed)
}

func (r *recordingDataplane) Run(ctx context.Context) error {
	<-ctx.Done()
	r.mu.Lock()
	r.detached = true
	r.mu.Unlock()
	return nil
}

func (r *recordingDataplane) Apply(_ context.Context, s []dataplane.Service) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.applied = append(r.applied, s)
	return nil
}

func (r *recordingDataplane) setFail(err error) {
	r.mu.Lock()
	r.fail = err
	r.mu.Unlock()
}

func (r *recordingDataplane) Refresh() {
	r.mu.Lock()
	r.refresh++
	r.mu.Unlock()
}

func (r *recordingDataplane) last() []dataplane.Service {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.applied) == 0 {
		return nil
	}
	return r.applied[len(r.applied)-1]
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
	rec := &recordingDataplane{}
	saved := newDataplane
	newDataplane = func(cfg dataplane.Config) (programmer, error) {
		if cfg.PodPrefix != netip.MustParsePrefix("2001:db8:abc:de00:1234::/80") {
			t.Errorf("dataplane Pod prefix %s", cfg.PodPrefix)
		}
		return rec, nil
	}
	t.Cleanup(func() { newDataplane = saved })
	a := startLocalAgent(t, 20*time.Millisecond, func(o *Options) {
		o.DNSAddr, o.APIAddr, o.Dataplane, o.TTLMargin = "127.0.0.1:0", "[::1]:0", DataplaneOn, 100*time.Millisecond
		o.NodeAddr = netip.MustParseAddr("2600:1f14::1")
		storeClusterCA(t, o.DataDir)
	})
	commit(t, a.bucket, "web", "hello:v1", true)
	vip := service.Identity("demo", "default", "web").VIP
	waitFor(t, 20*time.Second, "web programmed", func() bool {
		s := rec.last()
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
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !rec.detached {
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
	saved := newDataplane
	t.Cleanup(func() { newDataplane = saved })
	newDataplane = func(cfg dataplane.Config) (programmer, error) {
		got <- cfg.NodeAddr
		return &recordingDataplane{}, nil
	}
	a := startLocalAgent(t, 20*time.Millisecond, func(o *Options) {
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

// feedHarness runs a dataplane feed over rec with web committed, a
// logger the test reads and a confirmation time the test sets.
type feedHarness struct {
	f    *dataplaneFeed
	rec  *recordingDataplane
	logs *logBuffer

	mu        sync.Mutex
	confirmed time.Time
}

func startFeed(t *testing.T, rec *recordingDataplane) *feedHarness {
	t.Helper()
	b := localstore.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := b.CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	commit(t, b, "web", "hello:v1", true)
	h := &feedHarness{rec: rec, logs: &logBuffer{}}
	h.f = newDataplaneFeed(Config{Cluster: "demo", Provider: "local"}, Options{Dataplane: DataplaneAuto}, b, netip.Addr{}, health.NewHealth(),
		slog.New(slog.NewTextHandler(h.logs, nil)))
	h.f.dp = rec
	h.f.confirmed = func() time.Time {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.confirmed
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.f.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func (h *feedHarness) confirm(at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.confirmed = at
}

// webView is a view of web with backends (a leader's) or without (the
// durable snapshot's).
func webView(backends ...string) *pb.ServiceSnapshot {
	s := &pb.Service{Namespace: "default", Name: "web"}
	for _, b := range backends {
		s.Endpoints = append(s.Endpoints, &pb.Endpoint{Address: b, NodeId: "a"})
	}
	return &pb.ServiceSnapshot{Services: []*pb.Service{s}}
}

// A restarted agent keeps the dataplane an earlier one left forwarding:
// the durable snapshot restored at startup (no backends) is not applied
// over it; the first leader's snapshot is, with the lease renewed first
// from the leader's confirmation.
func TestInheritedDataplaneKeptUntilLiveSnapshot(t *testing.T) {
	rec := &recordingDataplane{inherited: true, inheritedUntil: time.Now().Add(time.Hour)}
	h := startFeed(t, rec)
	h.f.setView(webView(), true)
	waitFor(t, 10*time.Second, "the restored view held back", func() bool {
		return strings.Contains(h.logs.String(), "the inherited dataplane keeps forwarding until a leader's snapshot")
	})
	if n := rec.applies(); n != 0 {
		t.Fatalf("the restored view was applied over the inherited dataplane (%d applies)", n)
	}
	if r := rec.renewals(); len(r) != 0 {
		t.Fatalf("the inherited lease was renewed without a leader: %v", r)
	}

	at := time.Now()
	h.confirm(at)
	h.f.setView(webView("2001:db8:0:1:1::5"), false)
	waitFor(t, 10*time.Second, "the leader's view applied", func() bool { return rec.applies() == 1 })
	if got := rec.last(); len(got) != 1 || len(got[0].Backends) != 1 {
		t.Fatalf("applied %+v, want web with the leader's backend", got)
	}
	if r := rec.renewals(); len(r) == 0 || !r[0].Equal(at.Add(coordinator.Retention)) {
		t.Fatalf("renewals %v, want the first at the confirmation plus %v", r, coordinator.Retention)
	}
	if !strings.Contains(h.logs.String(), "a leader's snapshot arrived: programming it over the inherited dataplane") {
		t.Errorf("the take-over is not logged:\n%s", h.logs)
	}
}

// Without a leader, the inherited dataplane is kept only while its lease
// lasts; then the current view (identities, no backends) is applied and
// nothing renews the lease.
func TestInheritedDataplaneReleasedWhenLeaseEnds(t *testing.T) {
	rec := &recordingDataplane{inherited: true, inheritedUntil: time.Now().Add(50 * time.Millisecond)}
	h := startFeed(t, rec)
	h.f.setView(webView(), true)
	waitFor(t, 10*time.Second, "the restored view applied once the inherited lease ended", func() bool { return rec.applies() == 1 })
	if got := rec.last(); len(got) != 1 || len(got[0].Backends) != 0 {
		t.Fatalf("applied %+v, want web without backends", got)
	}
	if !strings.Contains(h.logs.String(), "the inherited dataplane's lease ended without a leader's snapshot") {
		t.Errorf("the release is not logged:\n%s", h.logs)
	}
	if r := rec.renewals(); len(r) != 0 {
		t.Fatalf("the lease was renewed without a leader: %v", r)
	}
}

// The lease follows the coordinator's confirmations: Retention after the
// last one, renewed while the agent runs.
func TestDataplaneLeaseFollowsConfirmations(t *testing.T) {
	rec := &recordingDataplane{}
	h := startFeed(t, rec)
	h.f.setView(webView(), true)
	waitFor(t, 10*time.Second, "the restored view applied", func() bool { return rec.applies() == 1 })
	if r := rec.renewals(); len(r) != 0 {
		t.Fatalf("renewed %v before any leader confirmed a snapshot", r)
	}
	t1 := time.Now()
	h.confirm(t1)
	h.f.setView(webView("2001:db8:0:1:1::5"), false)
	waitFor(t, 10*time.Second, "the leader's view applied", func() bool { return rec.applies() == 2 })
	if r := rec.renewals(); len(r) != 1 || !r[0].Equal(t1.Add(coordinator.Retention)) {
		t.Fatalf("renewals %v, want one at the confirmation plus %v", r, coordinator.Retention)
	}
	// A later confirmation without a new view: the periodic renewal.
	t2 := t1.Add(3 * time.Second)
	h.confirm(t2)
	waitFor(t, 10*time.Second, "the lease renewed from the later confirmation", func() bool {
		r := rec.renewals()
		return len(r) > 0 && r[len(r)-1].Equal(t2.Add(coordinator.Retention))
	})
}

// Off means no dataplane on the node: one an earlier agent left pinned is
// removed at startup.
func TestDataplaneOffRemovesPinned(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a bpf filesystem needs root; run the tests as root")
	}
	root := t.TempDir()
	bpffs := filepath.Join(root, "sys/fs/bpf")
	if err := os.MkdirAll(bpffs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("bpf", bpffs, "bpf", 0, ""); err != nil {
		t.Skipf("cannot mount a bpf filesystem: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(bpffs, syscall.MNT_DETACH) })
	left := filepath.Join(bpffs, "podmin", "links")
	if err := os.MkdirAll(left, 0o700); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	newDataplaneFeed(Config{Cluster: "demo", Provider: "aws"}, Options{Root: root, Dataplane: DataplaneOff}, nil, netip.Addr{}, health.NewHealth(),
		slog.New(slog.NewTextHandler(logs, nil)))
	if _, err := os.Stat(filepath.Dir(left)); !os.IsNotExist(err) {
		t.Fatalf("the pinned dataplane is still there with %s=off (%v)", EnvDataplane, err)
	}
	if !strings.Contains(logs.String(), "removed the pinned dataplane an earlier agent left") {
		t.Errorf("the removal is not logged:\n%s", logs)
	}
}

// The dataplane is pinned beneath the node root, and one that runs
// unpinned (a restart would interrupt Service traffic) is named in
// /readyz.
func TestDataplanePinningProblemInReadyz(t *testing.T) {
	root := t.TempDir()
	var got dataplane.Config
	saved := newDataplane
	t.Cleanup(func() { newDataplane = saved })
	newDataplane = func(cfg dataplane.Config) (programmer, error) {
		got = cfg
		return &recordingDataplane{pinProblem: errors.New("the dataplane is not pinned, so an agent restart interrupts Service traffic: mount -t bpf bpf /sys/fs/bpf")}, nil
	}
	health := health.NewHealth()
	f := newDataplaneFeed(Config{Cluster: "demo", Provider: "aws"}, Options{Root: root, Dataplane: DataplaneOn}, nil,
		netip.MustParseAddr("2600:1f14::1"), health, slog.New(slog.DiscardHandler))
	if !f.enabled() {
		t.Fatal("the dataplane was not loaded")
	}
	if want := filepath.Join(root, "sys/fs/bpf/podmin"); got.PinPath != want {
		t.Errorf("pin path %q, want %q beneath the node root", got.PinPath, want)
	}
	ok, reasons := health.Ready()
	if ok || !slices.ContainsFunc(reasons, func(r string) bool {
		return strings.HasPrefix(r, componentPinning+": the dataplane is not pinned")
	}) {
		t.Fatalf("readiness %v %q, want the unpinned dataplane named", ok, reasons)
	}
}

// Service DNS records the agent serves but cannot write to disk (a full
// disk, a broken directory) make the node not ready, naming them, until an
// update writes them again.
func TestUnpersistedDNSInReadyz(t *testing.T) {
	root := t.TempDir()
	blocked := filepath.Join(root, "blocked")
	if err := os.WriteFile(blocked, []byte("a file where a directory belongs"), 0o644); err != nil {
		t.Fatal(err)
	}
	health := health.NewHealth()
	c := &coordination{log: slog.New(slog.DiscardHandler), health: health, feed: &dataplaneFeed{cluster: "demo"},
		dns: service.New(service.Config{Cluster: "demo", ZonePath: filepath.Join(blocked, "cluster.local.zone")})}
	snap := &pb.ServiceSnapshot{Services: []*pb.Service{{Namespace: "default", Name: "web"}}}
	c.view(snap)
	ok, reasons := health.Ready()
	if ok || !slices.ContainsFunc(reasons, func(r string) bool { return strings.HasPrefix(r, componentDNSState+": ") }) {
		t.Fatalf("readiness %v %q, want the unwritten DNS records named", ok, reasons)
	}
	if err := os.Remove(blocked); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(blocked, 0o755); err != nil {
		t.Fatal(err)
	}
	c.view(snap)
	if ok, reasons := health.Ready(); !ok {
		t.Fatalf("after the directory was repaired: %q", reasons)
	}
}

// The coordinator learns that the node applied a view (and confirms it
// to the leader, which stops a rollout slot's Pod only after every live
// node did) once the dataplane holds it: a view the dataplane refused is
// not confirmed until a retry at the next renewal programs it.
func TestDataplaneConfirmsOnlyAppliedViews(t *testing.T) {
	rec := &recordingDataplane{}
	h := startFeed(t, rec)
	var mu sync.Mutex
	var confirmed []*pb.ServiceSnapshot
	h.f.applied = func(s *pb.ServiceSnapshot) {
		mu.Lock()
		confirmed = append(confirmed, s)
		mu.Unlock()
	}
	rec.setFail(errors.New("map update: no space left"))
	v1 := webView("2001:db8:0:1:1::5")
	v1.Term, v1.Generation, v1.Revision = 3, 1, 7
	h.f.setView(v1, false)
	waitFor(t, 10*time.Second, "the refused view reported", func() bool { return strings.Contains(h.logs.String(), "dataplane not programmed") })
	mu.Lock()
	n := len(confirmed)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("a view the dataplane refused was confirmed: %v", confirmed)
	}
	// The failure passes: the same view is programmed again without a
	// new one, and confirmed.
	rec.setFail(nil)
	waitFor(t, 10*time.Second, "the view retried and confirmed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(confirmed) == 1 && confirmed[0].GetRevision() == 7
	})
	v2 := webView()
	v2.Term, v2.Generation, v2.Revision = 3, 1, 8
	h.f.setView(v2, false)
	waitFor(t, 10*time.Second, "the next view confirmed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(confirmed) == 2 && confirmed[1].GetRevision() == 8
	})
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
		a.run(t, context.Background(), c, Options{Root: a.root, HealthAddr: "127.0.0.1:0", PollInterval: 20 * time.Millisecond, DataDir: data,
			DNSAddr: "127.0.0.1:0", APIAddr: "[::1]:0", NodeID: "node-1"})
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
