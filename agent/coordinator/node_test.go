// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/dataplane"
	"podmin.dev/podmin/agent/dataplane/dataplanetest"
	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/state"
	"podmin.dev/podmin/internal/state/statetest"
	"podmin.dev/podmin/internal/syncio"
)

// logBuffer is a log sink safe for the feed's goroutines.
type logBuffer = syncio.Buffer

// commit deploys a built-in deployment of NodeGroup workers straight to
// the bucket, as podmin deploy does.
func commit(t testing.TB, b objstore.Store, name, image string, service bool) state.Entry {
	t.Helper()
	return statetest.Commit(t, b, "workers", name, image, service)
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestDataplaneWanted(t *testing.T) {
	if ok, why := dataplaneWanted(NodeOptions{Local: true, Settings: Settings{Dataplane: DataplaneAuto}}); ok || !strings.Contains(why, EnvDataplane) {
		t.Fatalf("local node mode loads the dataplane by default: %v %q", ok, why)
	}
	if ok, _ := dataplaneWanted(NodeOptions{Local: true, Settings: Settings{Dataplane: DataplaneOn}}); !ok {
		t.Fatal("on is ignored")
	}
	if ok, _ := dataplaneWanted(NodeOptions{Settings: Settings{Dataplane: DataplaneOff}}); ok {
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
	f := newDataplaneFeed(NodeOptions{Cluster: "demo", Local: true, Store: b, Settings: Settings{Dataplane: DataplaneOff}}, netip.Addr{}, slog.New(slog.DiscardHandler))
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
	hl := health.NewHealth()
	f := newDataplaneFeed(NodeOptions{Cluster: "demo", Local: true, Store: b, Health: hl, Settings: Settings{Dataplane: DataplaneOff}}, netip.Addr{}, slog.New(slog.DiscardHandler))
	rec := &dataplanetest.Recording{}
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
	waitFor(t, 10*time.Second, "web and api programmed", func() bool { return len(rec.Last()) == 2 })

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
	waitFor(t, 10*time.Second, "web's new port programmed beside the bad Services", func() bool { return ports(rec.Last())["web"] == 444 })
	got := ports(rec.Last())
	if len(got) != 2 || got["api"] != 80 {
		t.Fatalf("programmed %v, want web on its new port and api on its last good one, db left out", got)
	}
	_, reasons := hl.Ready()
	joined := strings.Join(reasons, "\n")
	if !strings.Contains(joined, "Service default/api") || !strings.Contains(joined, "Service default/db") || strings.Contains(joined, "default/web") {
		t.Fatalf("readiness %q, want api and db named", reasons)
	}
}

// feedHarness runs a dataplane feed over rec with web committed, a
// logger the test reads and a confirmation time the test sets.
type feedHarness struct {
	f    *dataplaneFeed
	rec  *dataplanetest.Recording
	logs *logBuffer

	mu        sync.Mutex
	confirmed time.Time
}

func startFeed(t *testing.T, rec *dataplanetest.Recording) *feedHarness {
	t.Helper()
	b := localstore.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := b.CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	commit(t, b, "web", "hello:v1", true)
	h := &feedHarness{rec: rec, logs: &logBuffer{}}
	h.f = newDataplaneFeed(NodeOptions{Cluster: "demo", Local: true, Store: b, Settings: Settings{Dataplane: DataplaneAuto}}, netip.Addr{},
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
	rec := &dataplanetest.Recording{Inherit: true, InheritedUntil: time.Now().Add(time.Hour)}
	h := startFeed(t, rec)
	h.f.setView(webView(), true)
	waitFor(t, 10*time.Second, "the restored view held back", func() bool {
		return strings.Contains(h.logs.String(), "the inherited dataplane keeps forwarding until a leader's snapshot")
	})
	if n := rec.Applies(); n != 0 {
		t.Fatalf("the restored view was applied over the inherited dataplane (%d applies)", n)
	}
	if r := rec.Renewals(); len(r) != 0 {
		t.Fatalf("the inherited lease was renewed without a leader: %v", r)
	}

	at := time.Now()
	h.confirm(at)
	h.f.setView(webView("2001:db8:0:1:1::5"), false)
	waitFor(t, 10*time.Second, "the leader's view applied", func() bool { return rec.Applies() == 1 })
	if got := rec.Last(); len(got) != 1 || len(got[0].Backends) != 1 {
		t.Fatalf("applied %+v, want web with the leader's backend", got)
	}
	if r := rec.Renewals(); len(r) == 0 || !r[0].Equal(at.Add(Retention)) {
		t.Fatalf("renewals %v, want the first at the confirmation plus %v", r, Retention)
	}
	if !strings.Contains(h.logs.String(), "a leader's snapshot arrived: programming it over the inherited dataplane") {
		t.Errorf("the take-over is not logged:\n%s", h.logs)
	}
}

// Without a leader, the inherited dataplane is kept only while its lease
// lasts; then the current view (identities, no backends) is applied and
// nothing renews the lease.
func TestInheritedDataplaneReleasedWhenLeaseEnds(t *testing.T) {
	rec := &dataplanetest.Recording{Inherit: true, InheritedUntil: time.Now().Add(50 * time.Millisecond)}
	h := startFeed(t, rec)
	h.f.setView(webView(), true)
	// The lease's end and the view's kick may each apply it: the same
	// view twice when the view came first.
	waitFor(t, 10*time.Second, "the restored view applied once the inherited lease ended", func() bool { return rec.Applies() >= 1 })
	if got := rec.Last(); len(got) != 1 || len(got[0].Backends) != 0 {
		t.Fatalf("applied %+v, want web without backends", got)
	}
	if !strings.Contains(h.logs.String(), "the inherited dataplane's lease ended without a leader's snapshot") {
		t.Errorf("the release is not logged:\n%s", h.logs)
	}
	if r := rec.Renewals(); len(r) != 0 {
		t.Fatalf("the lease was renewed without a leader: %v", r)
	}
}

// The lease follows the coordinator's confirmations: Retention after the
// last one, renewed while the agent runs.
func TestDataplaneLeaseFollowsConfirmations(t *testing.T) {
	rec := &dataplanetest.Recording{}
	h := startFeed(t, rec)
	h.f.setView(webView(), true)
	waitFor(t, 10*time.Second, "the restored view applied", func() bool { return rec.Applies() == 1 })
	if r := rec.Renewals(); len(r) != 0 {
		t.Fatalf("renewed %v before any leader confirmed a snapshot", r)
	}
	t1 := time.Now()
	h.confirm(t1)
	h.f.setView(webView("2001:db8:0:1:1::5"), false)
	waitFor(t, 10*time.Second, "the leader's view applied", func() bool { return rec.Applies() == 2 })
	if r := rec.Renewals(); len(r) != 1 || !r[0].Equal(t1.Add(Retention)) {
		t.Fatalf("renewals %v, want one at the confirmation plus %v", r, Retention)
	}
	// A later confirmation without a new view: the periodic renewal.
	t2 := t1.Add(3 * time.Second)
	h.confirm(t2)
	waitFor(t, 10*time.Second, "the lease renewed from the later confirmation", func() bool {
		r := rec.Renewals()
		return len(r) > 0 && r[len(r)-1].Equal(t2.Add(Retention))
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
	newDataplaneFeed(NodeOptions{Cluster: "demo", Root: root, Settings: Settings{Dataplane: DataplaneOff}}, netip.Addr{},
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
	load := func(cfg dataplane.Config) (Dataplane, error) {
		got = cfg
		return &dataplanetest.Recording{PinErr: errors.New("the dataplane is not pinned, so an agent restart interrupts Service traffic: mount -t bpf bpf /sys/fs/bpf")}, nil
	}
	hl := health.NewHealth()
	f := newDataplaneFeed(NodeOptions{Cluster: "demo", Root: root, Health: hl, Settings: Settings{Dataplane: DataplaneOn, NewDataplane: load}},
		netip.MustParseAddr("2600:1f14::1"), slog.New(slog.DiscardHandler))
	if !f.enabled() {
		t.Fatal("the dataplane was not loaded")
	}
	if want := filepath.Join(root, "sys/fs/bpf/podmin"); got.PinPath != want {
		t.Errorf("pin path %q, want %q beneath the node root", got.PinPath, want)
	}
	ok, reasons := hl.Ready()
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
	hl := health.NewHealth()
	c := &Node{log: slog.New(slog.DiscardHandler), health: hl, feed: &dataplaneFeed{cluster: "demo"},
		dns: service.New(service.Config{Cluster: "demo", ZonePath: filepath.Join(blocked, "cluster.local.zone")})}
	snap := &pb.ServiceSnapshot{Services: []*pb.Service{{Namespace: "default", Name: "web"}}}
	c.view(snap)
	ok, reasons := hl.Ready()
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
	if ok, reasons := hl.Ready(); !ok {
		t.Fatalf("after the directory was repaired: %q", reasons)
	}
}

// The coordinator learns that the node applied a view (and confirms it
// to the leader, which stops a rollout slot's Pod only after every live
// node did) once the dataplane holds it: a view the dataplane refused is
// not confirmed until a retry at the next renewal programs it.
func TestDataplaneConfirmsOnlyAppliedViews(t *testing.T) {
	rec := &dataplanetest.Recording{}
	h := startFeed(t, rec)
	var mu sync.Mutex
	var confirmed []*pb.ServiceSnapshot
	h.f.applied = func(s *pb.ServiceSnapshot) {
		mu.Lock()
		confirmed = append(confirmed, s)
		mu.Unlock()
	}
	rec.SetFail(errors.New("map update: no space left"))
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
	rec.SetFail(nil)
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
