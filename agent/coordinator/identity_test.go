// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator"
)

// logged reports whether an agent's log has an ERROR line containing s.
func logged(a *localAgent, s string) bool {
	for _, line := range strings.Split(a.logs.String(), "\n") {
		if strings.Contains(line, "level=ERROR") && strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// allBackends returns every endpoint address of an agent's view.
func allBackends(a *localAgent) []string {
	var out []string
	for _, svc := range a.lastView().GetServices() {
		for _, e := range svc.Endpoints {
			out = append(out, e.Address)
		}
	}
	return out
}

// A second agent under a live node ID is refused: the leader logs it at
// ERROR, so does the refused agent, and its endpoints never reach a
// snapshot while the first agent's stay.
func TestDuplicateNodeIDIsRefused(t *testing.T) {
	store := newBucket(t)
	c := newLocalCluster(t, pollTiming, 3*pollTiming.Timeout, inNodeGroup("workers", web))
	var agents []*localAgent
	for i := range 3 {
		agents = append(agents, c.start(t, c.spec(i, store)))
	}
	for _, a := range agents {
		a.coord.SetEndpoints([]coordinator.Endpoint{{Service: web, Addr: a.prefix.Addr().Next()}})
	}
	var l int
	eventually(t, 10*time.Second, "every endpoint everywhere", func() bool {
		n, i := leaderOf(agents)
		l = i
		for _, a := range agents {
			if len(a.backends(web)) != 3 {
				return false
			}
		}
		return n == 1
	})
	victim := agents[(l+1)%3]
	spec := c.spec(9, store)
	spec.id = victim.id
	twin := c.start(t, spec)
	twin.coord.SetEndpoints([]coordinator.Endpoint{{Service: web, Addr: twin.prefix.Addr().Next()}})
	eventually(t, 10*time.Second, "the duplicate refused and logged at ERROR on both sides", func() bool {
		return logged(agents[l], "two agents share one node ID") && logged(twin, "the leader refused this node's identity")
	})
	// The duplicate keeps trying; none of its claims gets through.
	deadline := time.Now().Add(5 * pollTiming.Renew)
	for time.Now().Before(deadline) {
		for _, a := range agents {
			if slices.Contains(allBackends(a), twin.prefix.Addr().Next().String()) {
				t.Fatalf("%s serves the duplicate's endpoint", a.id)
			}
			if !slices.Contains(a.backends(web), victim.prefix.Addr().Next().String()) {
				t.Fatalf("%s lost the first %s's endpoint", a.id, victim.id)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Two agents under the leader's node ID do not fight over the lease: the
// second sees the lease held under its ID at another address, says so at
// ERROR and waits like any follower; the leader refuses its Hello at ERROR.
// The lease term never changes.
func TestDuplicateOfTheLeaderNeverTakesTheLease(t *testing.T) {
	store := newBucket(t)
	// The slower poll keeps a loaded machine from losing the lease for
	// want of a timely renewal, which is no flip.
	c := newLocalCluster(t, pollTiming, 3*pollTiming.Timeout, inNodeGroup("workers", web))
	first := c.start(t, c.spec(0, store))
	eventually(t, 5*time.Second, "a leader", func() bool { return first.coord.Elector().IsLeader() })
	term, _ := first.coord.Elector().Term()
	spec := c.spec(1, store)
	spec.id = first.id
	twin := c.start(t, spec)
	deadline := time.Now().Add(2 * pollTiming.Timeout)
	for time.Now().Before(deadline) {
		if twin.coord.Elector().IsLeader() || !first.coord.Elector().IsLeader() {
			t.Fatal("the lease changed hands between two agents of one node ID")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if now, _ := first.coord.Elector().Term(); now.Record.Term != term.Record.Term {
		t.Fatalf("lease term %d → %d", term.Record.Term, now.Record.Term)
	}
	eventually(t, 5*time.Second, "both sides logged the duplicate at ERROR", func() bool {
		return logged(twin, "another agent holds the lease under this node's ID") && logged(first, "two agents share one node ID") &&
			logged(twin, "the leader refused this node's identity")
	})
}

// A self-issued identity (every node can issue one: it reads the cluster
// CA) is refused when it claims another node's Pod prefix or address, and
// its endpoints are refused for Services of another NodeGroup, in either
// direction. Nothing of it reaches a snapshot.
func TestSelfIssuedIdentityClaimsAreRefused(t *testing.T) {
	store := newBucket(t)
	edgeSvc := coordinator.ServiceID{Namespace: "edge", Name: "proxy"}
	services := func(ctx context.Context) ([]coordinator.IndexService, error) {
		return []coordinator.IndexService{{ID: web, NodeGroup: "workers"}, {ID: edgeSvc, NodeGroup: "edge"}}, nil
	}
	c := newLocalCluster(t, pollTiming, 3*pollTiming.Timeout, services)
	agents := []*localAgent{c.start(t, c.spec(0, store)), c.start(t, c.spec(1, store))}
	for _, a := range agents {
		a.coord.SetEndpoints([]coordinator.Endpoint{{Service: web, Addr: a.prefix.Addr().Next()}})
	}
	var l int
	eventually(t, 10*time.Second, "both endpoints everywhere", func() bool {
		n, i := leaderOf(agents)
		l = i
		return n == 1 && len(agents[0].backends(web)) == 2 && len(agents[1].backends(web)) == 2
	})
	leader, victim := agents[l], agents[1-l]
	dial := func(t *testing.T, nodegroup, id string, addr netip.Addr) *api.Client {
		t.Helper()
		spec := c.spec(7, store)
		spec.id, spec.nodegroup, spec.addr = id, nodegroup, addr
		cl, err := api.Dial(leader.advertise.String(), leader.id, c.identity(t, spec), api.LoopbackDial)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	intruderAddr := netip.MustParseAddr("2001:db8::99")
	ownPrefix := "2001:db8:999::/80"
	t.Run("another node's prefix", func(t *testing.T) {
		cl := dial(t, "workers", "intruder", intruderAddr)
		_, err := cl.Hello(t.Context(), &pb.HelloRequest{PodPrefix: victim.prefix.String(), NodeId: "intruder", Address: intruderAddr.String()})
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "is registered to node "+victim.id) {
			t.Fatalf("Hello claiming %s's prefix: %v, want PermissionDenied", victim.id, err)
		}
		// Without a registration nothing is accepted.
		_, err = cl.ReportEndpoints(t.Context(), &pb.EndpointReport{Endpoints: []*pb.ReportedEndpoint{
			{Namespace: web.Namespace, Service: web.Name, Address: victim.prefix.Addr().Next().Next().String()}}})
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("report without a registration: %v", err)
		}
		if !logged(leader, "Pod prefix "+victim.prefix.String()+" is registered to node "+victim.id) {
			t.Fatalf("the leader did not log the refused claim at ERROR:\n%s", leader.logs.String())
		}
	})
	t.Run("another node's address", func(t *testing.T) {
		cl := dial(t, "workers", "intruder2", victim.advertise.Addr())
		_, err := cl.Hello(t.Context(), &pb.HelloRequest{PodPrefix: ownPrefix})
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "is registered to node "+victim.id) {
			t.Fatalf("Hello at %s's address: %v, want PermissionDenied", victim.id, err)
		}
	})
	for _, tc := range []struct{ nodegroup, service string }{{"edge", "product/web"}, {"workers", "edge/proxy"}} {
		t.Run("NodeGroup "+tc.nodegroup+" reporting "+tc.service, func(t *testing.T) {
			id := "intruder-" + tc.nodegroup
			addr := netip.MustParseAddr("2001:db8::9a")
			if tc.nodegroup == "workers" {
				addr = netip.MustParseAddr("2001:db8::9b")
			}
			prefix := map[string]string{"edge": "2001:db8:99a::/80", "workers": "2001:db8:99b::/80"}[tc.nodegroup]
			cl := dial(t, tc.nodegroup, id, addr)
			if _, err := cl.Hello(t.Context(), &pb.HelloRequest{PodPrefix: prefix}); err != nil {
				t.Fatal(err)
			}
			ns, name, _ := strings.Cut(tc.service, "/")
			ep := netip.MustParsePrefix(prefix).Addr().Next().String()
			resp, err := cl.ReportEndpoints(t.Context(), &pb.EndpointReport{Endpoints: []*pb.ReportedEndpoint{{Namespace: ns, Service: name, Address: ep}}})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Refused) != 1 || !strings.Contains(resp.Refused[0], "not defined by a deployment of NodeGroup "+tc.nodegroup) {
				t.Fatalf("refused = %q, want the endpoint refused", resp.Refused)
			}
			deadline := time.Now().Add(2 * pollTiming.Renew)
			for time.Now().Before(deadline) {
				for _, a := range agents {
					if slices.Contains(allBackends(a), ep) {
						t.Fatalf("%s serves the refused endpoint %s", a.id, ep)
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	for _, a := range agents {
		if got := a.backends(web); len(got) != 2 {
			t.Errorf("%s: web's backends %v, want the two real nodes'", a.id, got)
		}
	}
}
