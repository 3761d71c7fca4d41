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

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/state"
)

// appliedView is a view an agent applied, and when.
type appliedView struct {
	at   time.Time
	view *pb.ServiceSnapshot
}

// A rolling update over three agents (maxUnavailable 1) replaces each
// node's Pod only after every node applied the snapshot without the old
// Pod's endpoint, and a drain after the last of them; never two nodes at
// once. Each agent's reconciler is played: it asks the Gate whenever the
// coordinator asks for a pass, and, once admitted, runs the new revision
// with a new endpoint. The figures of each step are logged.
func TestRolloutReplacesEachPodAfterEveryNodeAppliedItsWithdrawal(t *testing.T) {
	const drain = 300 * time.Millisecond
	store := newBucket(t)
	r0 := nodepod.Revision(commitWeb(t, store, "hello:v1"))
	r1 := nodepod.Revision(commitWeb(t, store, "hello:v2"))
	c := newLocalCluster(t, fastTiming, 30*time.Second, inNodeGroup("workers", web))
	var mu sync.Mutex
	views := map[string][]appliedView{}
	passes := map[string]chan struct{}{}
	c.tune = func(spec agentSpec, o *coordinator.Options) {
		pass := make(chan struct{}, 1)
		passes[spec.id] = pass
		o.Drain = drain
		o.OnSlotFreed = func() {
			select {
			case pass <- struct{}{}:
			default:
			}
		}
		on := o.OnView
		o.OnView = func(s *pb.ServiceSnapshot) {
			on(s)
			mu.Lock()
			views[spec.id] = append(views[spec.id], appliedView{at: time.Now(), view: s})
			mu.Unlock()
		}
	}
	k, _ := state.NewKey("workers", "web")
	var agents []*localAgent
	for i := range 3 {
		a := c.start(t, c.spec(i, store))
		a.coord.DeploymentsChanged([]staticpod.DeploymentState{{Deployment: k, Pod: "web", Namespace: "default", Applied: r0, Desired: r1, AppliedAt: time.Now()}})
		if err := a.coord.SetEndpoints([]coordinator.Endpoint{{Service: web, Addr: a.prefix.Addr().Next()}}); err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
	}
	eventually(t, 10*time.Second, "every agent applied the three endpoints", func() bool {
		for _, a := range agents {
			if len(a.backends(web)) != 3 {
				return false
			}
		}
		return true
	})
	u := staticpod.Update{Deployment: k, Pod: "web", Namespace: "default", From: r0, To: r1, Service: &state.ServiceID{Namespace: web.Namespace, Name: web.Name}}
	removed := map[string]time.Time{}
	ready := map[string]time.Time{}
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, a := range agents {
		pass := passes[a.id]
		wg.Go(func() {
			for {
				if ok, _ := a.coord.Admit(ctx, u); ok {
					break
				}
				select {
				case <-ctx.Done():
					return
				case <-pass:
				}
			}
			at := time.Now()
			// The new revision runs and is ready at once, at a new address.
			a.coord.DeploymentsChanged([]staticpod.DeploymentState{{Deployment: k, Pod: "web", Namespace: "default", Applied: r1, Desired: r1, AppliedAt: at}})
			if err := a.coord.SetEndpoints([]coordinator.Endpoint{{Service: web, Addr: a.prefix.Addr().Next().Next()}}); err != nil {
				t.Error(err)
			}
			mu.Lock()
			removed[a.id], ready[a.id] = at, time.Now()
			mu.Unlock()
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the rollout did not finish within a minute: replaced %v", removed)
	}
	mu.Lock()
	defer mu.Unlock()
	order := slices.Clone(agents)
	slices.SortFunc(order, func(a, b *localAgent) int { return removed[a.id].Compare(removed[b.id]) })
	for i := 1; i < len(order); i++ {
		if prev, next := order[i-1], order[i]; !removed[next.id].After(ready[prev.id]) {
			t.Errorf("%s was replaced before %s's new Pod was ready: two nodes between revisions", next.id, prev.id)
		}
	}
	for _, a := range order {
		old := a.prefix.Addr().Next().String()
		var first, last time.Time
		for _, b := range agents {
			// The view that withdrew the old endpoint: the first after the
			// last one holding it.
			var at time.Time
			for _, v := range views[b.id] {
				if hasEndpoint(v.view, old) {
					at = time.Time{}
				} else if at.IsZero() {
					at = v.at
				}
			}
			switch {
			case at.IsZero():
				t.Errorf("%s never applied a snapshot without %s's old endpoint", b.id, a.id)
				continue
			case !at.Before(removed[a.id]):
				t.Errorf("%s applied the withdrawal of %s's old endpoint at %s, after the Pod was replaced at %s",
					b.id, a.id, at.Format("15:04:05.000"), removed[a.id].Format("15:04:05.000"))
			}
			if first.IsZero() || at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
		}
		gap := removed[a.id].Sub(last)
		if gap < drain {
			t.Errorf("%s's Pod replaced %s after the last node applied its withdrawal, less than the %s drain", a.id, gap, drain)
		}
		t.Logf("%s: the three nodes applied the withdrawal within %s of each other; the old Pod was replaced %s after the last of them (drain %s)",
			a.id, last.Sub(first).Round(time.Microsecond), gap.Round(time.Microsecond), drain)
	}
}
