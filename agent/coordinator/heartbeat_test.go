// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/state"
)

// beatTiming is slow enough that a loaded test machine does not miss a
// heartbeat (one every 400 ms, lost after 1 s) and fast enough to wait
// for.
var beatTiming = election.Timing{Renew: time.Second, Timeout: 5 * time.Second, Hold: 3500 * time.Millisecond, Retry: 200 * time.Millisecond}

// readCounter counts an agent's reads of the lease and of the index.
type readCounter struct {
	objstore.Store
	lease, index atomic.Int64
}

func (r *readCounter) Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	r.count(key)
	return r.Store.Get(ctx, key, opts)
}

func (r *readCounter) Head(ctx context.Context, key string) (objstore.Info, error) {
	r.count(key)
	return r.Store.Head(ctx, key)
}

func (r *readCounter) count(key string) {
	switch key {
	case election.Key:
		r.lease.Add(1)
	case state.IndexPath:
		r.index.Add(1)
	}
}

// beatingCluster starts n agents that poll the index, each behind its own
// fault store and read counter.
func beatingCluster(t *testing.T, n int) ([]*localAgent, []*faultstore.Store, []*readCounter) {
	t.Helper()
	store := newBucket(t)
	deploy(t, store, "web", "default", true)
	c := newLocalCluster(t, beatTiming, 5*time.Second, nil)
	c.tune = func(_ agentSpec, o *coordinator.Options) {
		o.Services = nil
		o.Index = coordinator.NewIndexCache(o.Store)
		o.IndexPoll = 50 * time.Millisecond
	}
	var (
		agents []*localAgent
		faults []*faultstore.Store
		reads  []*readCounter
	)
	for i := range n {
		fs := faultstore.New(store)
		rc := &readCounter{Store: fs}
		faults, reads = append(faults, fs), append(reads, rc)
		agents = append(agents, c.start(t, c.spec(i, rc)))
	}
	return agents, faults, reads
}

// quietFollowers waits until the followers of a single leader have been
// vouched for during a renew interval, and returns the leader.
func quietFollowers(t *testing.T, agents []*localAgent) int {
	t.Helper()
	var (
		l     = -1
		since time.Time
	)
	eventually(t, 20*time.Second, "one leader whose followers are vouched for", func() bool {
		n, i := leaderOf(agents)
		ok := n == 1 && i == l
		for j, a := range agents {
			ok = ok && (j == l || a.coord.SafetyPoll() > 0)
		}
		if !ok {
			l, since = i, time.Time{}
			return false
		}
		if since.IsZero() {
			since = time.Now()
		}
		return time.Since(since) > beatTiming.Renew
	})
	return l
}

// While the leader's heartbeats arrive, its followers read neither the
// lease nor the index (its own index polls go on), and their safety poll
// slows to the vouched interval.
func TestHeartbeatsSilenceTheFollowers(t *testing.T) {
	agents, _, reads := beatingCluster(t, 3)
	l := quietFollowers(t, agents)
	var before [3]int64
	for i, r := range reads {
		before[i] = r.lease.Load() + r.index.Load()
	}
	leaderIndex := reads[l].index.Load()
	// Eight renew intervals (twelve are a minute at the default timing).
	window := 8 * beatTiming.Renew
	time.Sleep(window)
	if n, i := leaderOf(agents); n != 1 || i != l {
		t.Fatalf("the leadership changed during the window")
	}
	for i, r := range reads {
		if i == l {
			continue
		}
		if got := r.lease.Load() + r.index.Load() - before[i]; got != 0 {
			t.Errorf("node-%d read the lease or the index %d times in %s of heartbeats, want 0", i, got, window)
		}
		if got := agents[i].coord.SafetyPoll(); got != coordinator.MinSafetyPoll {
			t.Errorf("node-%d's safety poll = %s, want %s for 3 nodes", i, got, coordinator.MinSafetyPoll)
		}
	}
	if got := reads[l].index.Load() - leaderIndex; got < int64(window/(50*time.Millisecond))/2 {
		t.Errorf("the leader read the index %d times in %s, want about one every 50ms", got, window)
	}
}

// A leader cut off from the bucket stops vouching and loses its lease,
// which ends its followers' watches: they read the lease again, one of
// them takes over after Timeout of its own observation, and two agents
// never lead at once.
func TestLeaderThatLosesTheLeaseEndsItsWatches(t *testing.T) {
	agents, faults, reads := beatingCluster(t, 3)
	old := quietFollowers(t, agents)
	var before [3]int64
	for i, r := range reads {
		before[i] = r.lease.Load()
	}
	cut := time.Now()
	faults[old].SetRules(faultstore.Rule{Action: faultstore.Fail})
	next := -1
	deadline := time.Now().Add(20 * time.Second)
	for next < 0 {
		n, i := leaderOf(agents)
		if n > 1 {
			t.Fatal("two agents lead at once")
		}
		if n == 1 && i != old {
			next = i
		}
		if time.Now().After(deadline) {
			t.Fatal("no follower took over")
		}
		time.Sleep(time.Millisecond)
	}
	took := time.Since(cut)
	// The old leader's lease lapsed (Hold after its last renewal), so it
	// ended its watches: no follower is vouched for by it any more.
	if agents[old].coord.Elector().IsLeader() {
		t.Fatal("the cut-off leader still leads")
	}
	for i, r := range reads {
		if i != old && r.lease.Load() == before[i] {
			t.Errorf("node-%d never read the lease again", i)
		}
	}
	// The takeover waited for Timeout of the new leader's own
	// observation, which started only when the heartbeats stopped.
	// Loaded test machines add latency: the exact bound is checked on a
	// simulated clock in package election.
	bound := beatTiming.Timeout + 2*beatTiming.Renew + beatTiming.Retry + 2*time.Second
	t.Logf("takeover %s after the cut (Timeout %s, bound %s)", took, beatTiming.Timeout, bound)
	if took <= beatTiming.Timeout || took > bound {
		t.Errorf("takeover %s after the cut, want more than %s and at most %s", took, beatTiming.Timeout, bound)
	}
	// The followers of the new leader go quiet again.
	faults[old].SetRules()
	eventually(t, 10*time.Second, "the followers of the new leader are vouched for", func() bool {
		for j, a := range agents {
			if j != next && a.coord.SafetyPoll() == 0 {
				return false
			}
		}
		return true
	})
}

// A leader whose lease another writer took ends its watches as soon as
// its renewal finds out: its followers stop counting on it at once, not
// only when its heartbeats are missed.
func TestLeaderThatLosesTheLeaseClosesTheStreams(t *testing.T) {
	agents, faults, _ := beatingCluster(t, 3)
	old := quietFollowers(t, agents)
	obj, err := faults[old].Get(context.Background(), election.Key, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var rec election.Record
	if err := json.Unmarshal(obj.Data, &rec); err != nil {
		t.Fatal(err)
	}
	// Only what the followers log from the theft on counts: a loaded
	// machine may have made them miss heartbeats before it.
	from := make([]int, len(agents))
	for i, a := range agents {
		from[i] = a.logs.Len()
	}
	stolen, _ := json.Marshal(election.Record{LeaderID: "intruder", LeaderAddr: "[2001:db8::99]:8081", LastUpdated: time.Now().UTC(), Term: rec.Term + 10})
	if _, err := faults[old].PutIfMatch(context.Background(), election.Key, stolen, obj.ETag); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*beatTiming.Renew+time.Second, "the old leader finds out", func() bool { return !agents[old].coord.Elector().IsLeader() })
	for i, a := range agents {
		if i == old {
			continue
		}
		eventually(t, 5*time.Second, "the follower is no longer vouched for", func() bool { return a.coord.SafetyPoll() == 0 })
		// Its last heartbeat would have vouched until the loss bound after
		// it; the closed stream ended that first, so the follower's
		// watchdog never had to. Judged by which of the two ended it, not
		// by how soon: a loaded machine may take its time either way.
		if since := a.logs.String()[from[i]:]; strings.Contains(since, "the leader's heartbeats stopped") {
			t.Errorf("node-%d stopped counting on the leader only when its heartbeats were missed, not when it closed the stream:\n%s", i, since)
		}
	}
}
