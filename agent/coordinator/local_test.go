// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/agent/identity"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/syncio"
)

// fastTiming keeps the lease arithmetic of the defaults (Hold < Timeout,
// renewals well inside Hold) at a pace a test can wait for.
var fastTiming = election.Timing{Renew: 100 * time.Millisecond, Timeout: 500 * time.Millisecond, Hold: 350 * time.Millisecond, Retry: 50 * time.Millisecond}

const fastRetention = time.Second

// localAgent is one agent of local node mode.
type localAgent struct {
	id        string
	coord     *coordinator.Coordinator
	prefix    netip.Prefix
	advertise netip.AddrPort
	cancel    context.CancelFunc
	done      chan struct{}

	mu     sync.Mutex
	view   *pb.ServiceSnapshot
	hints  []string
	onHint func() // the reconcile loop's Trigger, when one runs
	logs   syncBuffer
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer = syncio.Buffer

func (a *localAgent) lastView() *pb.ServiceSnapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.view
}

// backends returns the view's endpoint addresses of one Service.
func (a *localAgent) backends(s coordinator.ServiceID) []string {
	var out []string
	for _, svc := range a.lastView().GetServices() {
		if svc.Namespace == s.Namespace && svc.Name == s.Name {
			for _, e := range svc.Endpoints {
				out = append(out, e.Address)
			}
		}
	}
	return out
}

func (a *localAgent) stop() {
	a.cancel()
	<-a.done
}

// startLocal starts n agents on one machine, one bucket, loopback ports
// and documentation-range identity addresses, as local node mode does.
func startLocal(t testing.TB, store objstore.Store, n int, services []coordinator.ServiceID) []*localAgent {
	t.Helper()
	return startLocalEach(t, func(int) objstore.Store { return store }, n, services)
}

// startLocalEach is startLocal with each agent's own view of the bucket
// (a fault store per agent, say). Each agent logs into its own buffer.
func startLocalEach(t testing.TB, storeFor func(i int) objstore.Store, n int, services []coordinator.ServiceID) []*localAgent {
	t.Helper()
	c := newLocalCluster(t, fastTiming, fastRetention, inNodeGroup("workers", services...))
	var agents []*localAgent
	for i := range n {
		agents = append(agents, c.start(t, c.spec(i, storeFor(i))))
	}
	return agents
}

// inNodeGroup is an Options.Services of fixed Services, all defined by
// NodeGroup ng.
func inNodeGroup(ng string, services ...coordinator.ServiceID) func(context.Context) ([]coordinator.IndexService, error) {
	return func(context.Context) ([]coordinator.IndexService, error) {
		var out []coordinator.IndexService
		for _, s := range services {
			out = append(out, coordinator.IndexService{ID: s, NodeGroup: ng})
		}
		return out, nil
	}
}

// localCluster is the shared part of local agents: one cluster CA, the
// timing and the Services of the index.
type localCluster struct {
	ca        pki.ClusterCA
	timing    election.Timing
	retention time.Duration
	services  func(context.Context) ([]coordinator.IndexService, error)
	// tune, when set, adjusts each agent's options.
	tune func(spec agentSpec, o *coordinator.Options)
	// tweak, when set, adjusts each agent's options.
	tweak func(*coordinator.Options)
}

func newLocalCluster(t testing.TB, timing election.Timing, retention time.Duration, services func(context.Context) ([]coordinator.IndexService, error)) *localCluster {
	t.Helper()
	v, err := pki.GenerateClusterCA(rand.Reader, "local", time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.ParseClusterCA(v, "local")
	if err != nil {
		t.Fatal(err)
	}
	return &localCluster{ca: ca, timing: timing, retention: retention, services: services}
}

// agentSpec is one local agent's identity and bucket.
type agentSpec struct {
	id, nodegroup string
	addr          netip.Addr
	prefix        netip.Prefix
	store         objstore.Store
}

// spec is the i-th agent of NodeGroup workers: node-<i>, 2001:db8::<i+1>
// and its own /80.
func (c *localCluster) spec(i int, store objstore.Store) agentSpec {
	return agentSpec{id: fmt.Sprintf("node-%d", i), nodegroup: "workers", store: store,
		addr:   netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i + 1)}),
		prefix: netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x::/80", 0x100+i))}
}

// identity issues a node identity of the cluster for spec.
func (c *localCluster) identity(t testing.TB, spec agentSpec) *identity.Identity {
	t.Helper()
	id, err := identity.New(identity.Options{CA: c.ca, Cluster: "local", NodeGroup: spec.nodegroup, NodeID: spec.id, Addr: spec.addr})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// start runs one agent until the test ends (or its stop).
func (c *localCluster) start(t testing.TB, spec agentSpec) *localAgent {
	t.Helper()
	lis, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	port := uint16(lis.Addr().(*net.TCPAddr).Port)
	a := &localAgent{id: spec.id, prefix: spec.prefix, done: make(chan struct{}), advertise: netip.AddrPortFrom(spec.addr, port)}
	opts := coordinator.Options{
		NodeID: spec.id, NodeGroup: spec.nodegroup, Advertise: a.advertise, Listener: lis, Dial: api.LoopbackDial,
		PodPrefix: spec.prefix, Store: spec.store, Identity: c.identity(t, spec),
		Log:      slog.New(slog.NewTextHandler(&a.logs, nil)),
		Services: c.services,
		OnView: func(s *pb.ServiceSnapshot) {
			a.mu.Lock()
			a.view = s
			a.mu.Unlock()
		},
		OnIndexHint: func(etag string) {
			a.mu.Lock()
			a.hints = append(a.hints, etag)
			trigger := a.onHint
			a.mu.Unlock()
			if trigger != nil {
				trigger()
			}
		},
		Timing: c.timing, Retention: c.retention,
	}
	if c.tune != nil {
		c.tune(spec, &opts)
	}
	if c.tweak != nil {
		c.tweak(&opts)
	}
	a.coord, err = coordinator.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go func() {
		defer close(a.done)
		if err := a.coord.Run(ctx); err != nil {
			t.Errorf("%s: %v", a.id, err)
		}
	}()
	t.Cleanup(a.stop)
	return a
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func leaderOf(agents []*localAgent) (int, int) {
	n, idx := 0, -1
	for i, a := range agents {
		if a.coord.Elector().IsLeader() {
			n, idx = n+1, i
		}
	}
	return n, idx
}

// TestLocalNodesElectAndExchangeEndpoints is local node mode: three agents
// on one machine elect one leader over a local bucket, exchange endpoints
// over mTLS, receive the same snapshot and the leader's hints, and fail
// over when the leader stops.
func TestLocalNodesElectAndExchangeEndpoints(t *testing.T) {
	store := newBucket(t)
	agents := startLocal(t, store, 3, []coordinator.ServiceID{web, db})
	var want []string
	for i, a := range agents {
		e := a.prefix.Addr().Next()
		want = append(want, e.String())
		if err := a.coord.SetEndpoints([]coordinator.Endpoint{{Service: web, Addr: e}}); err != nil {
			t.Fatal(err)
		}
		if err := a.coord.SetEndpoints([]coordinator.Endpoint{{Service: web, Addr: netip.MustParseAddr("2001:db8:ffff::1")}}); err == nil {
			t.Errorf("node-%d accepted an endpoint outside its /80", i)
		}
		a.coord.SetEndpoints([]coordinator.Endpoint{{Service: web, Addr: e}})
	}
	slices.Sort(want)
	all := func(agents []*localAgent, want []string) func() bool {
		return func() bool {
			for _, a := range agents {
				if !slices.Equal(a.backends(web), want) || len(a.lastView().GetServices()) != 2 {
					return false
				}
			}
			return true
		}
	}
	eventually(t, 5*time.Second, "every agent sees every endpoint", all(agents, want))
	var l int
	eventually(t, 2*time.Second, "one leader", func() bool { n, i := leaderOf(agents); l = i; return n == 1 })
	stored, err := coordinator.LoadDurable(t.Context(), store)
	if err != nil || len(stored.Services) != 2 {
		t.Fatalf("durable snapshot = %v, %v", stored, err)
	}

	// A follower's index notification reaches every agent through the leader.
	f := (l + 1) % 3
	// Best effort: under load a lease may lapse between the lookup and the call.
	eventually(t, 2*time.Second, "the notification was accepted", func() bool {
		return agents[f].coord.NotifyIndexChanged(t.Context(), `"idx-1"`) == nil
	})
	eventually(t, 2*time.Second, "every agent got the index hint", func() bool {
		for _, a := range agents {
			a.mu.Lock()
			got := slices.Contains(a.hints, `"idx-1"`)
			a.mu.Unlock()
			if !got {
				return false
			}
		}
		return true
	})

	// The leader stops (SIGTERM): another agent leads and the snapshot
	// converges on the two remaining endpoints.
	stopped := time.Now()
	agents[l].stop()
	rest := slices.Delete(slices.Clone(agents), l, l+1)
	eventually(t, 3*time.Second, "a new leader", func() bool { n, _ := leaderOf(rest); return n == 1 })
	t.Logf("takeover %s after the leader stopped (renew interval %s)", time.Since(stopped), fastTiming.Renew)
	wantRest := slices.DeleteFunc(slices.Clone(want), func(s string) bool { return s == agents[l].prefix.Addr().Next().String() })
	eventually(t, 5*time.Second, "the remaining agents converge", all(rest, wantRest))
	// Every line names its node once; a normal stop is no warning.
	for _, a := range agents {
		for _, line := range strings.Split(a.logs.String(), "\n") {
			if strings.Count(line, " node=") > 1 {
				t.Errorf("%s logged node= twice: %s", a.id, line)
			}
			if strings.Contains(line, "lost the lease") && strings.Contains(line, "shutting down") && !strings.Contains(line, "level=INFO") {
				t.Errorf("%s: a resignation on shutdown is not INFO: %s", a.id, line)
			}
		}
	}
	if !strings.Contains(agents[l].logs.String(), `level=INFO msg="lost the lease" node=`+agents[l].id+` reason="shutting down"`) {
		t.Errorf("the stopped leader did not log its resignation at INFO:\n%s", agents[l].logs.String())
	}
}

// TestFollowerClearsBackendsAfterTheLeaseWindow partitions a follower
// from the leader and the bucket: it keeps backends for the lease window,
// then keeps only the DNS identities.
func TestFollowerClearsBackendsAfterTheLeaseWindow(t *testing.T) {
	store := newBucket(t)
	parts := faultstore.New(store)
	agents := startLocal(t, parts, 2, []coordinator.ServiceID{web})
	for _, a := range agents {
		a.coord.SetEndpoints([]coordinator.Endpoint{{Service: web, Addr: a.prefix.Addr().Next()}})
	}
	eventually(t, 5*time.Second, "both see both endpoints", func() bool {
		return len(agents[0].backends(web)) == 2 && len(agents[1].backends(web)) == 2
	})
	var l int
	eventually(t, 2*time.Second, "one leader", func() bool { n, i := leaderOf(agents); l = i; return n == 1 })
	leader := agents[l]
	// Cut the follower off by stopping the leader's API and lease
	// writes: the lease stays held by the old record.
	parts.SetRules(faultstore.Rule{Action: faultstore.Fail})
	leader.stop()
	follower := agents[1-l]
	eventually(t, 3*time.Second, "backends cleared", func() bool {
		v := follower.lastView()
		return len(v.GetServices()) == 1 && len(v.Services[0].Endpoints) == 0
	})
	// Judged from the follower's own last confirmation by a leader, not
	// from when the test cut the leader off: a loaded machine may have
	// synced last well before the cut.
	if held := time.Since(follower.coord.Status().Confirmed); held < fastRetention {
		t.Errorf("backends cleared %s after a leader last confirmed them, before the %s lease window", held, fastRetention)
	}
	if v := follower.lastView(); v.Services[0].Name != "web" {
		t.Errorf("the Service's DNS identity was dropped: %v", v)
	}
}
