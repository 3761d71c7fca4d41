// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/internal/clock/fakeclock"
	"podmin.dev/podmin/internal/objstore"
)

// pollTiming is the election's arithmetic at a poll interval short enough
// for tests yet long enough that a loaded machine keeps its lease.
var pollTiming = election.Timing{Renew: 400 * time.Millisecond, Timeout: 2 * time.Second, Hold: 1400 * time.Millisecond, Retry: 100 * time.Millisecond}

// recoveryTiming is the election's arithmetic at a one-second poll
// interval, the unit recovery is measured in: the work after a takeover
// (a few requests) stays well inside it even on a loaded machine.
var recoveryTiming = election.Timing{Renew: time.Second, Timeout: 5 * time.Second, Hold: 3500 * time.Millisecond, Retry: 200 * time.Millisecond}

// dynamicServices is an Options.Services whose Services a test changes,
// as a deploy changes the index.
type dynamicServices struct {
	mu  sync.Mutex
	ids []coordinator.ServiceID
}

func (d *dynamicServices) set(ids ...coordinator.ServiceID) {
	d.mu.Lock()
	d.ids = ids
	d.mu.Unlock()
}

func (d *dynamicServices) read(ctx context.Context) ([]coordinator.IndexService, error) {
	d.mu.Lock()
	ids := slices.Clone(d.ids)
	d.mu.Unlock()
	return inNodeGroup("workers", ids...)(ctx)
}

func hasService(a *localAgent, s coordinator.ServiceID) bool {
	for _, svc := range a.lastView().GetServices() {
		if svc.Namespace == s.Namespace && svc.Name == s.Name {
			return true
		}
	}
	return false
}

// A corrupt or deleted dns/services.pb together with a leader change never
// freezes a node: the next leader starts its generations again, but under
// a higher lease term, so every node takes its snapshot, and the stored
// object is rewritten. A Service added meanwhile reaches every node and
// the stored snapshot. How soon is logged, not judged: it depends on the
// machine's speed (the takeover's bound is the election's, tested on its
// fake clock, and the rewrite's is TestLeaderRewritesADamagedSnapshot's).
func TestDamagedSnapshotWithALeaderChangeRecovers(t *testing.T) {
	for _, damage := range []string{"garbage", "deleted"} {
		t.Run(damage, func(t *testing.T) {
			store := newBucket(t)
			services := &dynamicServices{}
			services.set(web)
			c := newLocalCluster(t, recoveryTiming, 3*recoveryTiming.Timeout, services.read)
			var agents []*localAgent
			for i := range 4 {
				agents = append(agents, c.start(t, c.spec(i, store)))
			}
			// A first leader change makes the generation climb, so the
			// next leader's restart at generation 1 is older by number.
			var l int
			eventually(t, 5*time.Second, "one leader", func() bool { n, i := leaderOf(agents); l = i; return n == 1 })
			// Stopped before its first write, the leader would leave no
			// generation for the next one to climb above.
			eventually(t, 5*time.Second, "the first leader's snapshot stored", func() bool {
				s, err := coordinator.LoadDurable(context.Background(), store)
				return err == nil && s.LeaderId == agents[l].id
			})
			agents[l].stop()
			agents = slices.Delete(agents, l, l+1)
			eventually(t, 5*time.Second, "a later generation stored", func() bool {
				s, err := coordinator.LoadDurable(context.Background(), store)
				return err == nil && s.Generation >= 2
			})
			for i, a := range agents {
				a.coord.SetEndpoints([]coordinator.Endpoint{{Service: web, Addr: a.prefix.Addr().Next()}})
				eventually(t, 10*time.Second, "every node has every endpoint", func() bool {
					for _, a := range agents {
						if len(a.backends(web)) != i+1 {
							return false
						}
					}
					return true
				})
			}
			eventually(t, 5*time.Second, "one leader", func() bool { n, i := leaderOf(agents); l = i; return n == 1 })
			before := read(t, store)

			switch damage {
			case "garbage":
				if _, err := store.Put(t.Context(), coordinator.SnapshotKey, []byte("\x0a\xffnot a snapshot")); err != nil {
					t.Fatal(err)
				}
			case "deleted":
				if err := store.Delete(t.Context(), coordinator.SnapshotKey, ""); err != nil {
					t.Fatal(err)
				}
			}
			// The leader stops (SIGTERM) and a Service is deployed.
			agents[l].stop()
			stopped := time.Now()
			services.set(web, db)
			rest := slices.Delete(slices.Clone(agents), l, l+1)
			bound := 2 * recoveryTiming.Renew
			eventually(t, 10*bound, "every node and the stored snapshot have the new Service", func() bool {
				for _, a := range rest {
					if !hasService(a, db) {
						return false
					}
				}
				s, err := coordinator.LoadDurable(context.Background(), store)
				return err == nil && len(s.Services) == 2
			})
			took := time.Since(stopped)
			after := read(t, store)
			t.Logf("%s snapshot: recovered on every node and in the bucket %s after the leader stopped (poll interval %s); stored term %d generation %d (was term %d generation %d)",
				damage, took, recoveryTiming.Renew, after.Term, after.Generation, before.Term, before.Generation)
			if after.Term <= before.Term || after.LeaderId == agents[l].id {
				t.Errorf("stored snapshot term %d by %s, want a term above %d by the new leader", after.Term, after.LeaderId, before.Term)
			}
		})
	}
}

// The leader finds its own stored snapshot corrupt or deleted and
// rewrites it within one renew interval, with no leader change, however
// often nodes report: the check runs on its own timer, which reports do
// not put off (they did, and with three agents a deleted snapshot came
// back only after minutes). The fake clock stands still once a renew
// interval has passed since the damage: the rewrite must follow without
// more time, while the reports keep arriving.
func TestLeaderRewritesADamagedSnapshot(t *testing.T) {
	store := newBucket(t)
	clock := fakeclock.New(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	timing := election.Timing{Renew: time.Second, Timeout: 3 * time.Hour, Hold: 2 * time.Hour, Retry: time.Second}
	c := newLocalCluster(t, timing, slotRetention, inNodeGroup("workers", web))
	c.tweak = func(o *coordinator.Options) { o.Clock = clock }
	a := c.start(t, c.spec(0, store))
	ep := []coordinator.Endpoint{{Service: web, Addr: a.prefix.Addr().Next()}}
	if err := a.coord.SetEndpoints(ep); err != nil {
		t.Fatal(err)
	}
	stored := func() bool {
		obj, err := store.Get(context.Background(), coordinator.SnapshotKey, objstore.GetOptions{})
		if err != nil {
			return false
		}
		s, err := coordinator.Unmarshal(obj.Data)
		return err == nil && len(s.Services) == 1 && len(s.Services[0].Endpoints) == 1
	}
	eventually(t, 10*time.Second, "the leader's snapshot stored", func() bool { return a.coord.Elector().IsLeader() && stored() })
	term, _ := a.coord.Elector().Term()
	for _, damage := range []func() error{
		func() error {
			_, err := store.Put(t.Context(), coordinator.SnapshotKey, []byte("garbage"))
			return err
		},
		func() error { return store.Delete(t.Context(), coordinator.SnapshotKey, "") },
	} {
		if err := damage(); err != nil {
			t.Fatal(err)
		}
		// A report every quarter of a renew interval, none changing the
		// snapshot.
		for end := clock.Now().Add(timing.Renew); clock.Now().Before(end); {
			if err := a.coord.SetEndpoints(ep); err != nil {
				t.Fatal(err)
			}
			clock.Advance(timing.Renew / 4)
		}
		eventually(t, 10*time.Second, "the snapshot rewritten within one renew interval while reports arrive", func() bool {
			if err := a.coord.SetEndpoints(ep); err != nil {
				t.Fatal(err)
			}
			return stored()
		})
	}
	if now, _ := a.coord.Elector().Term(); now.Record.Term != term.Record.Term {
		t.Errorf("the lease changed hands (term %d → %d): the leader should have repaired it itself", term.Record.Term, now.Record.Term)
	}
}
