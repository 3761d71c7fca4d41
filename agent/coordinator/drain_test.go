// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/internal/objstore"
)

// storedBackends returns the addresses of a Service's endpoints in the
// stored snapshot.
func storedBackends(store objstore.Store, s coordinator.ServiceID) []string {
	obj, err := store.Get(context.Background(), coordinator.SnapshotKey, objstore.GetOptions{})
	if err != nil {
		return nil
	}
	snap, err := coordinator.Unmarshal(obj.Data)
	if err != nil {
		return nil
	}
	var out []string
	for _, svc := range snap.GetServices() {
		if svc.Namespace == s.Namespace && svc.Name == s.Name {
			for _, e := range svc.Endpoints {
				out = append(out, e.Address)
			}
		}
	}
	return out
}

// SIGTERM drains a node: a follower's Drain returns once the leader wrote
// a snapshot without its endpoints, well inside the 5 s shutdown, long
// before the 35 s lease window would have expired them; then every other
// node drops them. Later Pod updates do not bring them back.
func TestDrainRemovesAFollowersEndpoints(t *testing.T) {
	store := newBucket(t)
	c := newLocalCluster(t, pollTiming, coordinator.Retention, inNodeGroup("workers", web))
	var agents []*localAgent
	for i := range 3 {
		agents = append(agents, c.start(t, c.spec(i, store)))
	}
	for _, a := range agents {
		a.coord.SetEndpoints([]coordinator.Endpoint{{Service: web, Addr: a.prefix.Addr().Next()}})
	}
	var l int
	eventually(t, 10*time.Second, "one leader and every endpoint everywhere", func() bool {
		n, i := leaderOf(agents)
		l = i
		for _, a := range agents {
			if len(a.backends(web)) != 3 {
				return false
			}
		}
		return n == 1 && len(storedBackends(store, web)) == 3
	})
	f := agents[(l+1)%3]
	mine := f.prefix.Addr().Next().String()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := f.coord.Drain(ctx); err != nil {
		t.Fatalf("drain: %v\n%s", err, f.logs.String())
	}
	drained := time.Since(start)
	if slices.Contains(storedBackends(store, web), mine) || slices.Contains(agents[l].backends(web), mine) {
		t.Fatalf("Drain returned, but the leader still has %s", mine)
	}
	f.coord.SetEndpoints([]coordinator.Endpoint{{Service: web, Addr: f.prefix.Addr().Next()}})
	f.stop()
	other := agents[(l+2)%3]
	eventually(t, 5*time.Second-drained, "the other follower drops the drained endpoints", func() bool {
		return len(other.backends(web)) == 2 && !slices.Contains(other.backends(web), mine)
	})
	t.Logf("follower drained in %s (the leader's snapshot without it written); the other follower followed after %s", drained, time.Since(start))
	if time.Since(start) > 5*time.Second {
		t.Errorf("drain took %s, more than the 5 s shutdown", time.Since(start))
	}
}

// A leader drains itself: it writes the snapshot without its own
// endpoints before it resigns.
func TestDrainOfTheLeader(t *testing.T) {
	store := newBucket(t)
	c := newLocalCluster(t, pollTiming, coordinator.Retention, inNodeGroup("workers", web))
	agents := []*localAgent{c.start(t, c.spec(0, store)), c.start(t, c.spec(1, store))}
	for _, a := range agents {
		a.coord.SetEndpoints([]coordinator.Endpoint{{Service: web, Addr: a.prefix.Addr().Next()}})
	}
	var l int
	eventually(t, 10*time.Second, "one leader with both endpoints stored", func() bool {
		n, i := leaderOf(agents)
		l = i
		return n == 1 && len(storedBackends(store, web)) == 2 && len(agents[1-l].backends(web)) == 2
	})
	mine := agents[l].prefix.Addr().Next().String()
	if err := agents[l].coord.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := storedBackends(store, web); slices.Contains(got, mine) || len(got) != 1 {
		t.Fatalf("stored endpoints after the leader drained: %v", got)
	}
	eventually(t, 5*time.Second, "the follower drops the leader's endpoint", func() bool {
		return slices.Equal(agents[1-l].backends(web), []string{agents[1-l].prefix.Addr().Next().String()})
	})
}
