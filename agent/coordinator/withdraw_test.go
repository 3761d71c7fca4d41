// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/state"
)

// leaderUpdate prepares the leader (node-9, of workers) to replace its own
// web Pod: it runs r0 with an endpoint of the Service, r1 is committed,
// and node-0 is live and ready with its own endpoint. It returns the
// Update its reconciler asks the Gate about.
func leaderUpdate(t *testing.T, s *slotLeader) staticpod.Update {
	t.Helper()
	k, _ := state.NewKey("workers", "web")
	s.a.coord.DeploymentsChanged([]staticpod.DeploymentState{{Deployment: k, Pod: "web", Namespace: "default", Applied: s.r0, Desired: s.r1, AppliedAt: s.clock.Now()}})
	if err := s.a.coord.SetEndpoints([]coordinator.Endpoint{{Service: web, Addr: s.a.prefix.Addr().Next()}}); err != nil {
		t.Fatal(err)
	}
	s.join(0, s.ready())
	return staticpod.Update{Deployment: k, Pod: "web", Namespace: "default", From: s.r0, To: s.r1,
		Service: &state.ServiceID{Namespace: web.Namespace, Name: web.Name}}
}

// stored is the snapshot in the bucket now.
func (s *slotLeader) stored() *pb.ServiceSnapshot { return read(s.t, s.store) }

// confirm has node i confirm that its DNS and dataplane hold snap.
func (s *slotLeader) confirm(i int, snap *pb.ServiceSnapshot) {
	s.t.Helper()
	at := api.Position{Term: snap.GetTerm(), Generation: snap.GetGeneration(), Revision: snap.GetRevision()}
	if err := s.a.coord.ConfirmApplied(context.Background(), s.node(i), at); err != nil {
		s.t.Fatal(err)
	}
}

func hasEndpoint(s *pb.ServiceSnapshot, addr string) bool {
	for _, svc := range s.GetServices() {
		for _, e := range svc.GetEndpoints() {
			if e.GetAddress() == addr {
				return true
			}
		}
	}
	return false
}

func (s *slotLeader) admit(u staticpod.Update) (bool, string) {
	return s.a.coord.Admit(context.Background(), u)
}

// The Gate says yes to replacing a Pod that serves a Service only after
// the snapshot without its endpoints is written, every live node
// confirmed it applied that snapshot, and the drain after that ended.
func TestPodStopsAfterEveryNodeAppliedTheWithdrawalAndTheDrain(t *testing.T) {
	s := newSlotLeader(t, 0, true, nil)
	u := leaderUpdate(t, s)
	own := s.a.prefix.Addr().Next().String()
	eventually(t, 10*time.Second, "both endpoints stored", func() bool {
		st := s.stored()
		return hasEndpoint(st, own) && hasEndpoint(st, s.endpoint(0).Addr.String())
	})
	ok, why := s.admit(u)
	if ok || !strings.Contains(why, "waiting until every live node applied the snapshot without this Pod's endpoints (not yet: node-0)") {
		t.Fatalf("before node-0 confirmed: %v %q", ok, why)
	}
	withdrawn := s.stored()
	if hasEndpoint(withdrawn, own) || !hasEndpoint(withdrawn, s.endpoint(0).Addr.String()) {
		t.Fatalf("the stored snapshot keeps the withdrawn endpoint or lost the other: %v", withdrawn)
	}
	// An older snapshot confirmed is not the withdrawal.
	older := &pb.ServiceSnapshot{Term: withdrawn.Term, Generation: withdrawn.Generation, Revision: withdrawn.Revision - 1}
	s.confirm(0, older)
	if ok, why := s.admit(u); ok || !strings.Contains(why, "not yet: node-0") {
		t.Fatalf("node-0 confirmed an earlier snapshot: %v %q", ok, why)
	}
	freed := s.freed.Load()
	s.confirm(0, withdrawn)
	if s.freed.Load() == freed {
		t.Fatal("the last confirmation did not ask the reconciler to pass again")
	}
	ok, why = s.admit(u)
	end := s.clock.Now().Add(slotDrain)
	if ok || !strings.Contains(why, "draining: no node sends this Pod new connections") || !strings.Contains(why, end.UTC().Format(time.RFC3339)) {
		t.Fatalf("after every confirmation: %v %q", ok, why)
	}
	s.clock.Advance(slotDrain - time.Millisecond)
	if ok, _ := s.admit(u); ok {
		t.Fatal("admitted a millisecond before the drain ended")
	}
	eventually(t, 10*time.Second, "a timer waits for the drain's end", func() bool { return s.clock.Waiting(end) })
	freed = s.freed.Load()
	s.clock.Advance(time.Millisecond)
	eventually(t, 10*time.Second, "the reconciler asked to pass at the drain's end", func() bool { return s.freed.Load() > freed })
	if ok, why := s.admit(u); !ok {
		t.Fatalf("at the drain's end: %q", why)
	}
}

// A node that never confirms holds the Pod for at most the lease window
// after the withdrawal: then it is taken as gone.
func TestUnconfirmedWithdrawalEndsAfterTheLeaseWindow(t *testing.T) {
	s := newSlotLeader(t, 0, true, nil)
	u := leaderUpdate(t, s)
	if ok, why := s.admit(u); ok || !strings.Contains(why, "not yet: node-0") {
		t.Fatalf("first ask: %v %q", ok, why)
	}
	s.clock.Advance(slotRetention - time.Millisecond)
	s.report(0, s.ready()) // node-0 stays live, and still does not confirm
	if ok, why := s.admit(u); ok || !strings.Contains(why, "not yet: node-0") {
		t.Fatalf("a millisecond before the bound: %v %q", ok, why)
	}
	s.clock.Advance(time.Millisecond)
	if ok, why := s.admit(u); ok || !strings.Contains(why, "draining") {
		t.Fatalf("at the bound: %v %q", ok, why)
	}
	s.clock.Advance(slotDrain)
	if ok, why := s.admit(u); !ok {
		t.Fatalf("after the drain: %q", why)
	}
}

// A node whose lease lapsed is gone: the withdrawal is not waited for on
// it, even within the lease window after the withdrawal.
func TestGoneNodeIsNotWaitedFor(t *testing.T) {
	s := newSlotLeader(t, 0, true, nil)
	u := leaderUpdate(t, s)
	s.clock.Advance(slotRetention / 2) // node-0 was last heard here
	if ok, why := s.admit(u); ok || !strings.Contains(why, "not yet: node-0") {
		t.Fatalf("first ask: %v %q", ok, why)
	}
	s.clock.Advance(slotRetention/2 + time.Millisecond)
	if ok, why := s.admit(u); ok || !strings.Contains(why, "draining") {
		t.Fatalf("once node-0's lease lapsed: %v %q", ok, why)
	}
}

// A Pod that served nothing through a Service (it had no endpoint to
// withdraw) is replaced at once: there is nothing to confirm or drain.
func TestPodWithoutEndpointsIsReplacedAtOnce(t *testing.T) {
	s := newSlotLeader(t, 0, true, nil)
	u := leaderUpdate(t, s)
	if err := s.a.coord.SetEndpoints(nil); err != nil {
		t.Fatal(err)
	}
	if ok, why := s.admit(u); !ok {
		t.Fatalf("a Pod without endpoints: %q", why)
	}
}

// A node whose kubelet has not listed its Pods since its agent started
// does not ask for a slot: it cannot tell which endpoints the update
// withdraws, and the leader would take its unknown readiness for broken.
func TestNodeAsksForASlotOnlyOnceItsKubeletListedThePods(t *testing.T) {
	s := newSlotLeader(t, 0, true, func(o *coordinator.Options) { o.Kubelet = true })
	k, _ := state.NewKey("workers", "web")
	s.a.coord.DeploymentsChanged([]staticpod.DeploymentState{{Deployment: k, Pod: "web", Namespace: "default", Applied: s.r0, Desired: s.r1}})
	s.join(0, s.ready())
	s.join(1, s.ready())
	u := staticpod.Update{Deployment: k, Pod: "web", Namespace: "default", From: s.r0, To: s.r1}
	if ok, why := s.admit(u); ok || !strings.Contains(why, "kubelet's Pods API has not listed this node's Pods yet") {
		t.Fatalf("before kubelet listed the Pods: %v %q", ok, why)
	}
	s.a.coord.PodsChanged([]*corev1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID("web-9"), Annotations: map[string]string{nodepod.RevisionAnnotation: s.r0}},
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}})
	if ok, why := s.admit(u); !ok {
		t.Fatalf("once kubelet listed the Pods: %q", why)
	}
}

// A node holding a slot whose leader goes away before it confirms the
// withdrawal waits at most the lease window after its grant, on its own
// clock, then drains and goes on: no wait is without a bound.
func TestSlotHolderWithoutALeaderGoesOnAfterTheLeaseWindow(t *testing.T) {
	s := newSlotLeader(t, 0, true, nil)
	u := leaderUpdate(t, s)
	if ok, why := s.admit(u); ok || !strings.Contains(why, "not yet: node-0") {
		t.Fatalf("first ask: %v %q", ok, why)
	}
	granted := s.clock.Now()
	s.a.stop() // the leadership ends; nobody answers any more
	ok, why := s.admit(u)
	if ok || !strings.Contains(why, "no leader confirms that every live node applied the snapshot without this Pod's endpoints") ||
		!strings.Contains(why, granted.Add(slotRetention).UTC().Format(time.RFC3339)) {
		t.Fatalf("without a leader: %v %q", ok, why)
	}
	s.clock.Advance(slotRetention - time.Millisecond)
	if ok, _ := s.admit(u); ok {
		t.Fatal("went on before the lease window after the grant")
	}
	s.clock.Advance(time.Millisecond)
	if ok, why := s.admit(u); ok || !strings.Contains(why, "draining") {
		t.Fatalf("at the lease window: %v %q", ok, why)
	}
	s.clock.Advance(slotDrain)
	if ok, why := s.admit(u); !ok {
		t.Fatalf("after the drain: %q", why)
	}
}
