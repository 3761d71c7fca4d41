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
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/state"
)

// pollingCluster starts n agents whose leader polls the index every 50 ms
// and keeps the NodeGroup views.
func pollingCluster(t *testing.T, store objstore.Store, n int) []*localAgent {
	t.Helper()
	c := newLocalCluster(t, fastTiming, fastRetention, nil)
	c.tune = func(_ agentSpec, o *coordinator.Options) {
		o.Services = nil
		o.Index = coordinator.NewIndexCache(store)
		o.Views = state.NewViewKeeper(store)
		o.IndexPoll = 50 * time.Millisecond
	}
	var agents []*localAgent
	for i := range n {
		agents = append(agents, c.start(t, c.spec(i, store)))
	}
	return agents
}

func hinted(a *localAgent, etag string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Contains(a.hints, etag)
}

// The leader finds a commit by its own poll and hints every agent with
// the new ETag, with no notification from the committer; every agent
// counts as hinted while its watch lasts, and the leader rewrites a view
// the committer did not write.
func TestLeaderPollsTheIndexAndHintsEveryNode(t *testing.T) {
	store := newBucket(t)
	agents := pollingCluster(t, store, 3)
	eventually(t, 5*time.Second, "every agent hinted", func() bool {
		for _, a := range agents {
			if !a.coord.Hinted() {
				return false
			}
		}
		return true
	})
	// The committer stops between the index and the view write.
	lossy := faultstore.New(store, faultstore.WithRules(faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpPut}, Prefix: state.ViewsPrefix}))
	deploy(t, lossy, "web", "default", true)
	info, err := store.Head(context.Background(), state.IndexPath)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "every agent got the hint with the new ETag", func() bool {
		for _, a := range agents {
			if !hinted(a, info.ETag) {
				return false
			}
		}
		return true
	})
	digest := state.ParseIndexMeta(info.Metadata).NodeGroup("workers", "").Digest
	eventually(t, 5*time.Second, "the leader rewrote the view", func() bool {
		_, err := state.ReadView(context.Background(), store, "workers", digest, 1<<20)
		return err == nil
	})
	// The Services come from the same index reads.
	eventually(t, 5*time.Second, "the snapshot names the Service", func() bool {
		s, err := coordinator.LoadDurable(context.Background(), store)
		return err == nil && len(s.Services) == 1 && s.Services[0].Name == "web"
	})
}

// A follower of a leader that does not poll the index (an older agent)
// is not hinted, so it keeps its normal poll.
func TestFollowerOfALeaderThatDoesNotPollIsNotHinted(t *testing.T) {
	store := newBucket(t)
	c := newLocalCluster(t, fastTiming, fastRetention, nil)
	c.tune = func(spec agentSpec, o *coordinator.Options) {
		if spec.id != "node-0" {
			o.Index = coordinator.NewIndexCache(store)
		}
	}
	old := c.start(t, c.spec(0, store))
	eventually(t, 5*time.Second, "the old agent leads", func() bool { return old.coord.Elector().IsLeader() })
	follower := c.start(t, c.spec(1, store))
	eventually(t, 5*time.Second, "the follower knows the leader", func() bool {
		rec, ok := follower.coord.Elector().Leader()
		return ok && rec.LeaderID == "node-0" && old.coord.Elector().IsLeader()
	})
	// Its watch is up once a hint reaches it.
	eventually(t, 5*time.Second, "the follower's watch", func() bool {
		_ = old.coord.NotifyIndexChanged(context.Background(), `"probe"`)
		return hinted(follower, `"probe"`)
	})
	if follower.coord.Hinted() {
		t.Fatal("a follower of a leader that does not poll the index counts as hinted")
	}
	if old.coord.Hinted() {
		t.Fatal("a leader without an index counts as hinted")
	}
}
