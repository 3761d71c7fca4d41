// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// commitSurgeWeb commits workers/web with image and maxSurge 1
// (maxUnavailable 0), as podmin deploy does.
func commitSurgeWeb(t *testing.T, store objstore.Store, image string) state.Entry {
	t.Helper()
	data, err := manifest.Build(manifest.BuildOptions{Name: "web", NodeGroup: "workers", Images: []string{image}})
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	obj["spec"].(map[string]any)["updateStrategy"] = map[string]any{"rollingUpdate": map[string]any{"maxSurge": 1, "maxUnavailable": 0}}
	if data, err = yaml.Marshal(obj); err != nil {
		t.Fatal(err)
	}
	ex, err := manifest.Extract(data, manifest.ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := state.NewKey("workers", "web")
	res, err := state.NewCommitter(store, state.CommitOptions{}).Deploy(t.Context(), state.Deployment{Key: k, Namespace: ex.Namespace, Pod: ex.PodYAML})
	if err != nil {
		t.Fatal(err)
	}
	return res.Entry
}

// askKind is node i's request for a slot of kind for r1, keeping eps.
func (s *slotLeader) askKind(i int, kind pb.SlotKind, eps ...api.Endpoint) *pb.SlotResponse {
	s.t.Helper()
	resp, err := s.a.coord.AcquireSlot(context.Background(), s.node(i), &pb.SlotRequest{Deployment: "web", Revision: s.r1, Kind: kind}, eps)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp
}

func (s *slotLeader) wantSurge(i int, what string) {
	s.t.Helper()
	if resp := s.askKind(i, pb.SlotKind_SLOT_SURGE, s.endpoint(i)); !resp.GetGranted() {
		s.t.Fatalf("%s: node-%d refused: %s", what, i, resp.GetReason())
	}
}

func (s *slotLeader) wantNoSurge(i int, what, reason string) {
	s.t.Helper()
	if resp := s.askKind(i, pb.SlotKind_SLOT_SURGE, s.endpoint(i)); resp.GetGranted() || !strings.Contains(resp.GetReason(), reason) {
		s.t.Fatalf("%s: node-%d granted %v (%q), want refused naming %q", what, i, resp.GetGranted(), resp.GetReason(), reason)
	}
}

// surging is a report of web running r1 beside r0.
func (s *slotLeader) surging(readiness pb.Readiness) *pb.DeploymentReport {
	return &pb.DeploymentReport{Revision: s.r1, Desired: s.r1, Retiring: s.r0, Readiness: readiness}
}

// maxSurge bounds how many nodes run a second Pod of a deployment at
// once: a surge slot is held from its grant until the node reports the
// new revision ready and its old Pod gone, and granting one withdraws
// nothing from the snapshot.
func TestSurgeSlotsAreBoundedByMaxSurge(t *testing.T) {
	s := newSlotLeaderWith(t, 3, false, nil, commitSurgeWeb)
	s.join(0, s.ready())
	s.join(1, s.ready())
	s.join(2, s.ready())
	eventually(t, 10*time.Second, "the three endpoints stored", func() bool {
		st := s.stored()
		return hasEndpoint(st, s.endpoint(0).Addr.String()) && hasEndpoint(st, s.endpoint(2).Addr.String())
	})
	before := s.stored()
	s.wantSurge(0, "the first node")
	if after := s.stored(); after.GetRevision() != before.GetRevision() || !hasEndpoint(after, s.endpoint(0).Addr.String()) {
		t.Fatalf("a surge slot withdrew the running Pod: %v", after)
	}
	s.wantNoSurge(1, "while node-0 surges", "maxSurge 1 allows 1 of 3 node(s) to run a second Pod of web at once: node-0 is updating to")
	s.report(0, s.surging(pb.Readiness_READINESS_READY))
	s.wantNoSurge(1, "while node-0 still runs its old Pod", "node-0 is updating to")
	s.report(0, &pb.DeploymentReport{Revision: s.r1, Desired: s.r1, Readiness: pb.Readiness_READINESS_READY})
	s.wantSurge(1, "once node-0 runs one Pod, ready")
	st := readStatusWhen(t, s.store, func(st *state.NodeGroupStatus) bool {
		return len(st.Rollouts) == 1 && len(st.Rollouts[0].Updating) == 1 && st.Rollouts[0].Updating[0] == "node-1"
	})
	if r := st.Rollouts[0]; r.MaxSurge != "1" || r.MaxUnavailable != "0" || r.Allowed != 1 {
		t.Fatalf("rollout status %+v", r)
	}
}

// A node whose running Pod is known broken starts its new one at once,
// surge limit or not (Kubernetes' DaemonSet controller does too).
func TestSurgeSlotAtOnceForABrokenNode(t *testing.T) {
	s := newSlotLeaderWith(t, 2, false, nil, commitSurgeWeb)
	s.join(0, s.ready())
	s.join(1, s.with(s.ready(), pb.Readiness_READINESS_NOT_READY, "kubelet reports the Pod not ready"))
	s.wantSurge(0, "the first node")
	s.wantSurge(1, "a broken node while the other surges")
}

// A node that reports two Pods, or an earlier leader's slot, or nothing
// yet to this leader, counts as surging; a missing node does not (it
// runs nothing here).
func TestWhatCountsAsSurging(t *testing.T) {
	s := newSlotLeaderWith(t, 3, false, nil, commitSurgeWeb)
	s.join(0, s.ready())
	if err := s.a.coord.Register(context.Background(), s.node(1)); err != nil {
		t.Fatal(err)
	}
	s.wantNoSurge(0, "node-1 has not reported", "node-1 has not reported its Pods to this leader yet")
	s.report(1, s.surging(pb.Readiness_READINESS_NOT_READY))
	s.wantNoSurge(0, "node-1 runs two Pods", "node-1 runs "+s.r1[:12]+" beside "+s.r0[:12])
	w := s.ready()
	w.Granted = s.r1
	s.report(1, w)
	s.wantNoSurge(0, "node-1 holds an earlier leader's slot", "node-1 is updating to "+s.r1[:12]+" (slot of an earlier leader)")
	s.report(1, s.ready())
	s.wantSurge(0, "node-1 runs one Pod and node-2 is missing")
	// node-0 asking again (its agent restarted) keeps its one slot.
	r := s.ready()
	r.Granted = s.r1
	s.report(0, r)
	s.wantSurge(0, "the holder asks again")
	s.wantNoSurge(1, "node-0 holds the only slot", "node-0 is updating to")
}

// A retirement withdraws only the old Pod's endpoints: the snapshot keeps
// the new Pod's, and the node is told once every live node applied it.
func TestRetireSlotWithdrawsOnlyTheOldPod(t *testing.T) {
	s := newSlotLeaderWith(t, 0, false, nil, commitSurgeWeb)
	s.join(0, s.ready())
	s.join(1, s.ready())
	s.wantSurge(0, "the surge")
	fresh := api.Endpoint{Namespace: web.Namespace, Service: web.Name, Addr: s.node(0).PodPrefix.Addr().Next().Next()}
	if _, _, err := s.a.coord.Report(context.Background(), s.node(0), []api.Endpoint{s.endpoint(0), fresh}); err != nil {
		t.Fatal(err)
	}
	s.report(0, s.surging(pb.Readiness_READINESS_READY))
	eventually(t, 10*time.Second, "both of node-0's endpoints stored", func() bool { return hasEndpoint(s.stored(), fresh.Addr.String()) })
	resp := s.askKind(0, pb.SlotKind_SLOT_RETIRE, fresh)
	if !resp.GetGranted() || resp.GetConfirmed() {
		t.Fatalf("retire: %+v", resp)
	}
	snap := s.stored()
	if hasEndpoint(snap, s.endpoint(0).Addr.String()) || !hasEndpoint(snap, fresh.Addr.String()) || !hasEndpoint(snap, s.endpoint(1).Addr.String()) {
		t.Fatalf("the snapshot after the retirement: %v", snap)
	}
	s.confirm(0, snap)
	s.confirm(1, snap)
	if resp := s.askKind(0, pb.SlotKind_SLOT_RETIRE, fresh); !resp.GetGranted() || !resp.GetConfirmed() {
		t.Fatalf("after every confirmation: %+v", resp)
	}
}

// surgeNode is a leader of workers on a fake clock that runs web itself,
// with a kubelet: its old Pod (r0) ready at the first address of its
// prefix, and r1 committed with maxSurge.
type surgeNode struct {
	*slotLeader
	k        state.Key
	old, neu netip.Addr
}

func newSurgeNode(t *testing.T) *surgeNode {
	t.Helper()
	s := newSlotLeaderWith(t, 0, true, func(o *coordinator.Options) { o.Kubelet = true }, commitSurgeWeb)
	n := &surgeNode{slotLeader: s, old: s.a.prefix.Addr().Next(), neu: s.a.prefix.Addr().Next().Next()}
	n.k, _ = state.NewKey("workers", "web")
	if err := s.a.coord.PublishServices(context.Background(), []staticpod.Service{{Deployment: n.k, ID: state.ServiceID{Namespace: web.Namespace, Name: web.Name},
		Spec: &manifest.Service{Name: web.Name, Namespace: web.Namespace, Selector: map[string]string{"app": "web"}}}}); err != nil {
		t.Fatal(err)
	}
	n.files(s.r0, "")
	n.kubelet(n.pod("old", s.r0, n.old, true, true))
	eventually(t, 10*time.Second, "the old Pod's endpoint stored", func() bool { return hasEndpoint(s.stored(), n.old.String()) })
	return n
}

// files is what the node's reconciler reports: web at applied, with a
// second Pod at retiring ("" for none).
func (n *surgeNode) files(applied, retiring string) {
	n.a.coord.DeploymentsChanged([]staticpod.DeploymentState{{Deployment: n.k, Pod: "web", Namespace: web.Namespace, Applied: applied,
		Desired: n.r1, Retiring: retiring, AppliedAt: n.clock.Now()}})
}

// pod is kubelet's account of one run of web.
func (n *surgeNode) pod(incarnation, rev string, addr netip.Addr, ready, probed bool) *corev1.Pod {
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-" + incarnation, Namespace: web.Namespace, UID: types.UID(incarnation), Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{nodepod.RevisionAnnotation: rev, nodepod.IncarnationAnnotation: incarnation}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "hello"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: addr.String()}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: cond, LastTransitionTime: metav1.NewTime(n.clock.Now())}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: ready,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(n.clock.Now())}}}}},
	}
	if probed {
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/"}}}
	}
	return p
}

func (n *surgeNode) kubelet(pods ...*corev1.Pod) { n.a.coord.PodsChanged(pods) }

// reports says whether the node reports addr as an endpoint now.
func (n *surgeNode) reports(addr netip.Addr) bool {
	for _, e := range n.a.coord.Local() {
		if e.Addr == addr {
			return true
		}
	}
	return false
}

func (n *surgeNode) retire() staticpod.Update {
	return staticpod.Update{Kind: staticpod.Retire, Deployment: n.k, Pod: "web", Namespace: web.Namespace, From: n.r0, To: n.r1,
		Static: "web", FromIncarnation: "old", Keep: n.r1, KeepIncarnation: "new", Service: &state.ServiceID{Namespace: web.Namespace, Name: web.Name}}
}

// The surge itself withdraws nothing; the old Pod is let go only once
// the new one is ready, then after its endpoint (and only its) left the
// snapshot, every live node applied that, and the drain passed; while
// kubelet still lists it ready as it stops, its endpoint stays out.
func TestRetireWaitsForTheNewPodThenWithdrawsTheOld(t *testing.T) {
	n := newSurgeNode(t)
	n.join(0, n.ready())
	surge := n.retire()
	surge.Kind, surge.Keep, surge.KeepIncarnation = staticpod.Surge, "", ""
	if ok, why := n.admit(surge); !ok {
		t.Fatalf("surge: %s", why)
	}
	if r := n.a.coord.StatusReport().GetDeployments()[0]; r.GetGranted() != n.r1 {
		t.Fatalf("the surge slot is not reported: %v", r)
	}
	if !n.reports(n.old) || !hasEndpoint(n.stored(), n.old.String()) {
		t.Fatal("the surge withdrew the running Pod")
	}
	n.files(n.r1, n.r0)
	n.kubelet(n.pod("old", n.r0, n.old, true, true), n.pod("new", n.r1, n.neu, false, true))
	ok, why := n.admit(n.retire())
	if ok || !strings.Contains(why, "keeps serving until the new one (revision "+n.r1[:12]+") is ready: kubelet reports it not ready") {
		t.Fatalf("before the new Pod is ready: %v %q", ok, why)
	}
	if !n.reports(n.old) || !hasEndpoint(n.stored(), n.old.String()) {
		t.Fatal("the old Pod was withdrawn before the new one was ready")
	}
	freed := n.freed.Load()
	n.kubelet(n.pod("old", n.r0, n.old, true, true), n.pod("new", n.r1, n.neu, true, true))
	if n.freed.Load() == freed {
		t.Fatal("the new Pod became ready and the reconciler was not asked to pass")
	}
	eventually(t, 10*time.Second, "the new Pod joined the Service", func() bool { return hasEndpoint(n.stored(), n.neu.String()) })
	ok, why = n.admit(n.retire())
	if ok || !strings.Contains(why, "not yet: node-0") {
		t.Fatalf("after the withdrawal: %v %q", ok, why)
	}
	snap := n.stored()
	if hasEndpoint(snap, n.old.String()) || !hasEndpoint(snap, n.neu.String()) {
		t.Fatalf("the withdrawal: %v", snap)
	}
	// kubelet lists the old Pod ready for a moment more: it stays out.
	n.kubelet(n.pod("old", n.r0, n.old, true, true), n.pod("new", n.r1, n.neu, true, true))
	if n.reports(n.old) || !n.reports(n.neu) {
		t.Fatalf("the node reports %v during the withdrawal", n.a.coord.Local())
	}
	n.confirm(0, snap)
	ok, why = n.admit(n.retire())
	if ok || !strings.Contains(why, "draining") {
		t.Fatalf("after the confirmation: %v %q", ok, why)
	}
	n.clock.Advance(slotDrain)
	if ok, why := n.admit(n.retire()); !ok {
		t.Fatalf("after the drain: %q", why)
	}
	n.files(n.r1, "")
	n.kubelet(n.pod("old", n.r0, n.old, true, true), n.pod("new", n.r1, n.neu, true, true))
	if n.reports(n.old) {
		t.Fatal("the old Pod's endpoint came back while kubelet stops it")
	}
	// Another run of the old revision (a rollback) serves while the
	// retired run still stops: only that one run is left out.
	again := n.neu.Next()
	n.kubelet(n.pod("old", n.r0, n.old, true, true), n.pod("new", n.r1, n.neu, true, true), n.pod("again", n.r0, again, true, true))
	if n.reports(n.old) || !n.reports(again) || !n.reports(n.neu) {
		t.Fatalf("with another run of the old revision, the node reports %v", n.a.coord.Local())
	}
	n.kubelet(n.pod("new", n.r1, n.neu, true, true))
	if n.reports(n.old) || !n.reports(n.neu) {
		t.Fatalf("after the old Pod left, the node reports %v", n.a.coord.Local())
	}
}

// An old Pod that serves nothing (kubelet reports it not ready) goes at
// once, whatever the new one's state, without a word to the leader.
func TestRetireOfAPodThatServesNothingGoesAtOnce(t *testing.T) {
	n := newSurgeNode(t)
	n.files(n.r1, n.r0)
	n.kubelet(n.pod("old", n.r0, n.old, false, true), n.pod("new", n.r1, n.neu, false, true))
	eventually(t, 10*time.Second, "the not ready Pod left the Service", func() bool { return !hasEndpoint(n.stored(), n.old.String()) })
	before := n.stored().GetRevision()
	if ok, why := n.admit(n.retire()); !ok {
		t.Fatalf("retire: %q", why)
	}
	if n.stored().GetRevision() != before {
		t.Fatal("a snapshot was written for a Pod that served nothing")
	}
}

// A new Pod with a container without a readiness probe must have been
// ready for the probeless hold before the old one goes; the node is asked
// again when the hold ends.
func TestRetireWaitsForTheProbelessHold(t *testing.T) {
	n := newSurgeNode(t)
	n.files(n.r1, n.r0)
	n.kubelet(n.pod("old", n.r0, n.old, true, true), n.pod("new", n.r1, n.neu, true, false))
	ok, why := n.admit(n.retire())
	end := n.clock.Now().Add(coordinator.ProbelessHold)
	if ok || !strings.Contains(why, "has been ready 5s (until "+end.UTC().Format(time.TimeOnly)) {
		t.Fatalf("during the hold: %v %q", ok, why)
	}
	eventually(t, 10*time.Second, "a timer waits for the hold's end", func() bool { return n.clock.Waiting(end) })
	freed := n.freed.Load()
	n.clock.Advance(coordinator.ProbelessHold)
	eventually(t, 10*time.Second, "the reconciler asked to pass at the hold's end", func() bool { return n.freed.Load() > freed })
	ok, why = n.admit(n.retire())
	if ok || !strings.Contains(why, "draining") {
		t.Fatalf("after the hold (no other node to confirm): %v %q", ok, why)
	}
	if n.reports(n.old) || hasEndpoint(n.stored(), n.old.String()) {
		t.Fatal("the old Pod was not withdrawn")
	}
}

// Once the surge started, the node passes again as soon as kubelet
// reports the new Pod ready, so the old one is let go without waiting
// for the next poll.
//
// kubelet may list the new Pod before the reconciler reports the pass
// that wrote it (its last report still names the old commit): the wait
// for the new Pod holds all the same.
func TestSurgeNodePassesAgainWhenTheNewPodIsReady(t *testing.T) {
	n := newSurgeNode(t)
	n.a.coord.DeploymentsChanged([]staticpod.DeploymentState{{Deployment: n.k, Pod: "web", Namespace: web.Namespace, Applied: n.r0, Desired: n.r0, AppliedAt: n.clock.Now()}})
	surge := n.retire()
	surge.Kind, surge.Keep, surge.KeepIncarnation = staticpod.Surge, "", ""
	if ok, why := n.admit(surge); !ok {
		t.Fatalf("surge: %s", why)
	}
	freed := n.freed.Load()
	n.kubelet(n.pod("old", n.r0, n.old, true, true), n.pod("new", n.r1, n.neu, false, true))
	n.files(n.r1, n.r0)
	if n.freed.Load() != freed {
		t.Fatal("asked to pass while the new Pod is not ready")
	}
	n.kubelet(n.pod("old", n.r0, n.old, true, true), n.pod("new", n.r1, n.neu, true, true))
	if n.freed.Load() == freed {
		t.Fatal("the new Pod is ready and the node was not asked to pass")
	}
}

// While kubelet does not answer, nobody can tell which Pod serves: both
// keep running.
func TestRetireWaitsWhileKubeletIsDown(t *testing.T) {
	n := newSurgeNode(t)
	n.files(n.r1, n.r0)
	n.kubelet(n.pod("old", n.r0, n.old, false, true), n.pod("new", n.r1, n.neu, true, true))
	n.a.coord.KubeletLost(errors.New("connection refused"))
	if ok, why := n.admit(n.retire()); ok || !strings.Contains(why, "kubelet's Pods API does not answer (connection refused)") {
		t.Fatalf("with kubelet down: %v %q", ok, why)
	}
	n.kubelet(n.pod("old", n.r0, n.old, false, true), n.pod("new", n.r1, n.neu, true, true))
	if ok, why := n.admit(n.retire()); !ok {
		t.Fatalf("kubelet answers again, the old Pod serves nothing: %q", why)
	}
}
