// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/clock/fakeclock"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
	"podmin.dev/podmin/internal/state/statetest"
)

// commitWeb commits deployment workers/web with image as podmin deploy
// does and returns its revision.
func commitWeb(t *testing.T, store objstore.Store, image string) state.Entry {
	t.Helper()
	return statetest.Commit(t, store, "workers", "web", image, false)
}

// runs makes an agent report that it runs web at rev, ready or not, as its
// reconciler and kubelet would.
func runs(a *localAgent, rev string, ready bool) {
	k, _ := state.NewKey("workers", "web")
	a.coord.DeploymentsChanged([]staticpod.DeploymentState{{Deployment: k, Pod: "web", Namespace: "default", Applied: rev, Desired: rev, AppliedAt: time.Now()}})
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	a.coord.PodsChanged([]*corev1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID(a.id + rev), Annotations: map[string]string{nodepod.RevisionAnnotation: rev}},
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}},
	}})
}

func readStatus(t *testing.T, store objstore.Store) *state.NodeGroupStatus {
	t.Helper()
	s, _, ok, err := state.ReadNodeGroupStatus(t.Context(), store, "workers")
	if err != nil || !ok {
		return nil
	}
	return s
}

// A node that holds a slot past the slot timeout without reporting the
// revision ready is reported stuck (an error of kind rollout in the
// NodeGroup's status), and still counts as unavailable: the other node
// does not get a slot.
func TestSlotTimeoutReportsTheNodeStuck(t *testing.T) {
	store := newBucket(t)
	if _, err := store.Put(t.Context(), state.TFVarsPath, []byte(`{"cluster":"local","nodegroups":[{"name":"workers","size":2}]}`)); err != nil {
		t.Fatal(err)
	}
	c := newLocalCluster(t, fastTiming, fastRetention, inNodeGroup("workers"))
	// The fake Pods start ready: the hold for Pods without a readiness
	// probe is not what this test is about.
	c.tweak = func(o *coordinator.Options) {
		o.Kubelet, o.SlotTimeout, o.ProbelessHold = true, 300*time.Millisecond, -1
	}
	agents := []*localAgent{c.start(t, c.spec(0, store)), c.start(t, c.spec(1, store))}
	r0 := nodepod.Revision(commitWeb(t, store, "hello:v1"))
	for _, a := range agents {
		runs(a, r0, true)
	}
	eventually(t, 10*time.Second, "both nodes report web ready", func() bool {
		s := readStatus(t, store)
		if s == nil || !s.Settled || s.Live != 2 {
			return false
		}
		for _, n := range s.Nodes {
			if len(n.Deployments) != 1 || n.Deployments[0].Readiness != state.Ready {
				return false
			}
		}
		return true
	})
	entry := commitWeb(t, store, "hello:v2")
	r1 := nodepod.Revision(entry)
	k, _ := state.NewKey("workers", "web")
	update := staticpod.Update{Deployment: k, Pod: "web", Namespace: "default", From: r0, To: r1}
	var granted *localAgent
	eventually(t, 10*time.Second, "one node gets the slot", func() bool {
		for _, a := range agents {
			if ok, _ := a.coord.Admit(t.Context(), update); ok {
				granted = a
				return true
			}
		}
		return false
	})
	other := agents[0]
	if granted == other {
		other = agents[1]
	}
	if ok, why := other.coord.Admit(t.Context(), update); ok || !strings.Contains(why, granted.id+" is updating to "+r1[:12]) {
		t.Fatalf("the second node: granted %v, %q", ok, why)
	}
	runs(granted, r1, false) // applied, never ready
	eventually(t, 10*time.Second, "the stuck node reported", func() bool {
		s := readStatus(t, store)
		if s == nil || len(s.Rollouts) != 1 || len(s.Rollouts[0].Stuck) != 1 || s.Rollouts[0].Stuck[0] != granted.id {
			return false
		}
		for _, n := range s.Nodes {
			if n.Node == granted.id {
				e := n.Deployments[0].Error
				return e != nil && e.Kind == state.ErrorRollout && e.Revision == r1 && strings.Contains(e.Message, "within 300ms of its rollout slot")
			}
		}
		return false
	})
	if ok, why := other.coord.Admit(t.Context(), update); ok || !strings.Contains(why, granted.id+" is not ready") {
		t.Fatalf("after the timeout the second node: granted %v, %q", ok, why)
	}
	// The stuck node's Pod becomes ready: the rollout goes on.
	runs(granted, r1, true)
	eventually(t, 10*time.Second, "the second node gets the slot", func() bool {
		ok, _ := other.coord.Admit(t.Context(), update)
		return ok
	})
}

// Without a leader a node still applies an update, but only after the
// leaderless wait plus its own position's delay, so a leaderless
// NodeGroup never replaces every Pod at once.
func TestLeaderlessFallbackWaitsItsTurn(t *testing.T) {
	store := newBucket(t)
	clock := fakeclock.New(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	c := newLocalCluster(t, fastTiming, fastRetention, inNodeGroup("workers"))
	spec := c.spec(0, store)
	coord, err := coordinator.New(coordinator.Options{NodeID: spec.id, NodeGroup: "workers", Advertise: netip.AddrPortFrom(spec.addr, 8081), PodPrefix: spec.prefix,
		Store: store, Identity: c.identity(t, spec), Clock: clock, LeaderlessAfter: time.Minute, LeaderlessStep: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := state.NewKey("workers", "web")
	u := staticpod.Update{Deployment: k, Pod: "web", From: "r0", To: "r1"}
	ok, why := coord.Admit(t.Context(), u)
	if ok || !strings.Contains(why, "no leader answers (no leader is known)") {
		t.Fatalf("first ask: %v %q", ok, why)
	}
	// The node is in no snapshot: its position comes from its node ID.
	var pos int
	if i := strings.Index(why, "(position "); i < 0 {
		t.Fatalf("no position in %q", why)
	} else if _, err := fmt.Sscan(why[i+len("(position "):], &pos); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute + time.Duration(pos)*30*time.Second - time.Second)
	if ok, _ := coord.Admit(t.Context(), u); ok {
		t.Fatalf("admitted a second before its turn (position %d)", pos)
	}
	clock.Advance(time.Second)
	if ok, why := coord.Admit(t.Context(), u); !ok {
		t.Fatalf("not admitted at its turn: %q", why)
	}
}

// The lease format the readers of internal/state parse is the election's.
func TestLeaseRecordReadsAsStateLease(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	data, err := json.Marshal(election.Record{LeaderID: "node-0", LeaderAddr: "[2001:db8::1]:8081", LastUpdated: at, Term: 9})
	if err != nil {
		t.Fatal(err)
	}
	var l state.Lease
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatal(err)
	}
	if l != (state.Lease{LeaderID: "node-0", LeaderAddr: "[2001:db8::1]:8081", LastUpdated: at, Term: 9}) {
		t.Fatalf("read %+v from %s", l, data)
	}
}
