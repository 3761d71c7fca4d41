// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/internal/clock/fakeclock"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
)

// restartedLeader is node-0 of a two-node cluster whose agent restarts
// while it leads: the bucket holds the lease its earlier run renewed
// leaseAge ago and the snapshot that run wrote, with the endpoints of
// both nodes. It returns the restarted agent (its kubelet has not listed
// its Pods yet) and both endpoints.
func restartedLeader(t *testing.T, leaseAge time.Duration) (*localAgent, objstore.Store, string, string) {
	t.Helper()
	store := newBucket(t)
	clock := fakeclock.New(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	c := newLocalCluster(t, longLease, slotRetention, inNodeGroup("workers", web))
	s0, s1 := c.spec(0, store), c.spec(1, store)
	lis, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	advertise := netip.AddrPortFrom(s0.addr, uint16(lis.Addr().(*net.TCPAddr).Port))
	own, other := s0.prefix.Addr().Next().String(), s1.prefix.Addr().Next().String()
	w := coordinator.NewWriter(store, s0.id)
	if _, err := w.Begin(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(t.Context(), &pb.ServiceSnapshot{
		Services: []*pb.Service{{Namespace: web.Namespace, Name: web.Name, Endpoints: []*pb.Endpoint{{Address: own, NodeId: s0.id}, {Address: other, NodeId: s1.id}}}},
		Nodes: []*pb.Node{
			{NodeId: s0.id, Nodegroup: "workers", Address: s0.addr.String(), PodPrefix: s0.prefix.String()},
			{NodeId: s1.id, Nodegroup: "workers", Address: s1.addr.String(), PodPrefix: s1.prefix.String()},
		},
	}); err != nil {
		t.Fatal(err)
	}
	lease, _ := json.Marshal(election.Record{LeaderID: s0.id, LeaderAddr: advertise.String(), LastUpdated: clock.Now().Add(-leaseAge), Term: 1})
	if _, err := store.Put(t.Context(), election.Key, lease); err != nil {
		t.Fatal(err)
	}
	c.tune = func(_ agentSpec, o *coordinator.Options) {
		_ = o.Listener.Close()
		o.Listener, o.Advertise, o.Clock, o.Kubelet = lis, advertise, clock, true
	}
	a := c.start(t, s0)
	eventually(t, 10*time.Second, "the restarted agent leads under term 2 and wrote a snapshot", func() bool {
		obj, err := store.Get(context.Background(), coordinator.SnapshotKey, objstore.GetOptions{})
		if err != nil {
			return false
		}
		s, err := coordinator.Unmarshal(obj.Data)
		return err == nil && s.Term == 2
	})
	return a, store, own, other
}

// An agent restarted while it leads takes its own lease over at once and
// starts from the snapshot its earlier run published: it keeps its own
// endpoints until its kubelet watcher reports, and the other node's until
// that node reports otherwise, so no snapshot of the failover lacks a
// live, ready endpoint.
func TestRestartedLeaderKeepsTheEndpointsItPublished(t *testing.T) {
	a, store, own, other := restartedLeader(t, 2*time.Second)
	first := read(t, store)
	if !hasEndpoint(first, own) || !hasEndpoint(first, other) {
		t.Fatalf("the restarted leader's first snapshot dropped endpoints: %v", first)
	}
	eventually(t, 10*time.Second, "the restarted leader's own view, with both endpoints", func() bool {
		v := a.lastView()
		return v.GetTerm() == 2 && hasEndpoint(v, own) && hasEndpoint(v, other)
	})
	// Its kubelet lists its Pods: none ready, so its endpoint goes.
	a.coord.PodsChanged([]*corev1.Pod{})
	eventually(t, 10*time.Second, "its own endpoint withdrawn once kubelet reported", func() bool {
		s := read(t, store)
		return !hasEndpoint(s, own) && hasEndpoint(s, other)
	})
}

// A lease renewed longer ago than the lease window is no proof that the
// stored snapshot is what the nodes serve (the cluster was down): the
// restarted leader keeps none of its endpoints.
func TestRestartAfterALongOutageKeepsNoStaleEndpoints(t *testing.T) {
	_, store, own, other := restartedLeader(t, time.Hour)
	if first := read(t, store); hasEndpoint(first, own) || hasEndpoint(first, other) {
		t.Fatalf("the snapshot of an hour ago was kept: %v", first)
	}
}

// When the leader dies (no resignation) mid-life, the new leader keeps
// the live nodes' endpoints in every snapshot it writes: each view every
// survivor receives from the new leadership holds both survivors'
// endpoints.
func TestFailoverKeepsLiveEndpoints(t *testing.T) {
	store := newBucket(t)
	faults := make([]*faultstore.Store, 3)
	c := newLocalCluster(t, fastTiming, 3*fastTiming.Timeout, inNodeGroup("workers", web))
	var mu sync.Mutex
	views := map[string][]*pb.ServiceSnapshot{}
	c.tune = func(spec agentSpec, o *coordinator.Options) {
		on := o.OnView
		o.OnView = func(s *pb.ServiceSnapshot) {
			on(s)
			mu.Lock()
			views[spec.id] = append(views[spec.id], s)
			mu.Unlock()
		}
	}
	var agents []*localAgent
	for i := range 3 {
		faults[i] = faultstore.New(store)
		agents = append(agents, c.start(t, c.spec(i, faults[i])))
		if err := agents[i].coord.SetEndpoints([]coordinator.Endpoint{{Service: web, Addr: agents[i].prefix.Addr().Next()}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "every agent sees the three endpoints", func() bool {
		for _, a := range agents {
			if len(a.backends(web)) != 3 {
				return false
			}
		}
		return true
	})
	var l int
	eventually(t, 5*time.Second, "one leader", func() bool { n, i := leaderOf(agents); l = i; return n == 1 })
	old, _ := agents[l].coord.Elector().Term()
	// The leader dies: its writes fail from now on, so it cannot resign.
	faults[l].SetRules(faultstore.Rule{Action: faultstore.Fail})
	agents[l].stop()
	rest := slices.Delete(slices.Clone(agents), l, l+1)
	eventually(t, 10*time.Second, "a new leader's snapshot on both survivors", func() bool {
		for _, a := range rest {
			if a.lastView().GetTerm() <= old.Record.Term {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	for _, a := range rest {
		for _, v := range views[a.id] {
			if v.GetTerm() <= old.Record.Term {
				continue
			}
			for _, b := range rest {
				if want := b.prefix.Addr().Next().String(); !hasEndpoint(v, want) {
					t.Errorf("%s got a view of term %d without live %s's endpoint: %v", a.id, v.GetTerm(), b.id, v)
				}
			}
		}
	}
}
