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

// The leader's poll of an unchanged index is one HEAD, and a new version
// is announced from its HEAD, before its body is read.
func TestIndexPollHeadsAndAnnouncesBeforeTheBody(t *testing.T) {
	store := newBucket(t)
	deploy(t, store, "web", "default", true)
	rc := &readCounter{Store: store}
	cache := coordinator.NewIndexCache(rc)
	ctx := context.Background()
	var announced []string
	note := func(etag string, meta state.IndexMeta) {
		if meta.WriteID() == "" {
			t.Errorf("the announcement of %s carries no write ID", etag)
		}
		announced = append(announced, etag)
	}
	v, err := cache.Poll(ctx, note)
	if err != nil || v.Index == nil {
		t.Fatalf("first poll: %+v, %v", v, err)
	}
	before := rc.index.Load()
	for range 3 {
		if w, err := cache.Poll(ctx, note); err != nil || w.ETag != v.ETag || w.Index != v.Index {
			t.Fatalf("poll of an unchanged index: %+v, %v", w, err)
		}
	}
	if got := rc.index.Load() - before; got != 3 {
		t.Errorf("3 polls of an unchanged index made %d requests, want 3 HEADs", got)
	}
	deploy(t, store, "db", "default", true)
	info, err := store.Head(ctx, state.IndexPath)
	if err != nil {
		t.Fatal(err)
	}
	w, err := cache.Poll(ctx, note)
	if err != nil || !objstore.SameETag(w.ETag, info.ETag) || len(w.Index.Items()) != 2 {
		t.Fatalf("poll of a new version: %+v, %v", w, err)
	}
	if len(announced) != 2 || !objstore.SameETag(announced[1], info.ETag) {
		t.Errorf("announced %v, want the first and the new version %s", announced, info.ETag)
	}
}

// An index hint names the NodeGroups the new version's metadata does not
// prove unchanged since the leader's previous version: the committed one.
func TestIndexHintNamesTheChangedNodeGroups(t *testing.T) {
	store := newBucket(t)
	ctx := context.Background()
	deployTo(t, store, "workers", "web", "default", false)
	deployTo(t, store, "batch", "job", "default", false)
	cache := coordinator.NewIndexCache(store)
	prev, err := cache.Poll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, proven := coordinator.ChangedNodeGroups(coordinator.IndexVersion{}, prev.Meta); proven {
		t.Error("a hint without a previous version claims a proof")
	}
	deployTo(t, store, "batch", "cron", "default", false)
	info, err := store.Head(ctx, state.IndexPath)
	if err != nil {
		t.Fatal(err)
	}
	changed, proven := coordinator.ChangedNodeGroups(prev, state.ParseIndexMeta(info.Metadata))
	if !proven || !slices.Equal(changed, []string{"batch"}) {
		t.Errorf("changed = %v, proven %v; want [batch], proven", changed, proven)
	}
	// Two writes later, both NodeGroups changed since prev.
	deployTo(t, store, "workers", "api", "default", false)
	info, err = store.Head(ctx, state.IndexPath)
	if err != nil {
		t.Fatal(err)
	}
	changed, proven = coordinator.ChangedNodeGroups(prev, state.ParseIndexMeta(info.Metadata))
	slices.Sort(changed)
	if !proven || !slices.Equal(changed, []string{"batch", "workers"}) {
		t.Errorf("changed = %v, proven %v; want [batch workers], proven", changed, proven)
	}
}
