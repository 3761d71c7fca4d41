// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/clock/fakeclock"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/state"
)

// holdNode starts one coordinator of a node with a kubelet on clock and
// has it run deployment web at rev.
func holdNode(t *testing.T, clock *fakeclock.Clock, tweak func(*coordinator.Options)) (*localAgent, string) {
	t.Helper()
	store := newBucket(t)
	c := newLocalCluster(t, fastTiming, fastRetention, inNodeGroup("workers"))
	c.tweak = func(o *coordinator.Options) {
		o.Kubelet, o.Clock = true, clock
		if tweak != nil {
			tweak(o)
		}
	}
	a := c.start(t, c.spec(0, store))
	const rev = "0123456789abcdef0123456789abcdef"
	k, _ := state.NewKey("workers", "web")
	a.coord.DeploymentsChanged([]staticpod.DeploymentState{{Deployment: k, Pod: "web", Namespace: "default", Applied: rev, Desired: rev, AppliedAt: clock.Now()}})
	return a, rev
}

// webPod is kubelet's account of web at rev: ready since readySince (zero
// for no time), after restarts, its container probed or not.
func webPod(rev string, readySince time.Time, restarts int32, probed bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID("web-" + rev), Annotations: map[string]string{nodepod.RevisionAnnotation: rev}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "hello:v1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(readySince)}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true, RestartCount: restarts,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(readySince)}}}}},
	}
	if probed {
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/"}}}
	}
	return p
}

func webReport(t *testing.T, a *localAgent) *pb.DeploymentReport {
	t.Helper()
	r := a.coord.StatusReport()
	if len(r.GetDeployments()) != 1 {
		t.Fatalf("report %v: want one deployment", r)
	}
	return r.GetDeployments()[0]
}

var holdStart = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// A Pod without a readiness probe that kubelet reports ready is not ready
// until kubelet has reported it ready for the default hold of 5 s, and it
// becomes ready when the hold ends without another word from kubelet.
func TestProbelessPodReadyOnlyAfterTheHold(t *testing.T) {
	clock := fakeclock.New(holdStart)
	a, rev := holdNode(t, clock, nil)
	// Kubernetes sends whole seconds: ready at 11:59:58 counts from
	// 11:59:59, so the hold ends at 12:00:04.
	a.coord.PodsChanged([]*corev1.Pod{webPod(rev, holdStart.Add(-2*time.Second), 0, false)})
	rep := webReport(t, a)
	if rep.GetReadiness() != pb.Readiness_READINESS_NOT_READY || !strings.Contains(rep.GetReason(), "must stay ready 5s before it counts (until 12:00:04 UTC)") {
		t.Fatalf("ready for 1 s: %v %q", rep.GetReadiness(), rep.GetReason())
	}
	end := holdStart.Add(4 * time.Second)
	eventually(t, 10*time.Second, "a timer waits for the hold's end", func() bool { return clock.Waiting(end) })
	clock.Advance(4*time.Second - time.Millisecond)
	if rep := webReport(t, a); rep.GetReadiness() != pb.Readiness_READINESS_NOT_READY {
		t.Fatalf("a millisecond before the hold ends: %v %q", rep.GetReadiness(), rep.GetReason())
	}
	clock.Advance(time.Millisecond)
	eventually(t, 10*time.Second, "web ready when the hold ends", func() bool {
		return webReport(t, a).GetReadiness() == pb.Readiness_READINESS_READY
	})
	if rep := webReport(t, a); rep.GetReason() != "" {
		t.Fatalf("ready with reason %q", rep.GetReason())
	}
}

// Kubelet's whole-second time leaves a second in which the Pod became
// ready; a sighting by the node inside that second is the later bound the
// hold counts from, while one before it (of an earlier run) is not used.
func TestProbelessHoldCountsFromASightingInsideKubeletsSecond(t *testing.T) {
	clock := fakeclock.New(holdStart.Add(400 * time.Millisecond))
	a, rev := holdNode(t, clock, nil)
	a.coord.PodsChanged([]*corev1.Pod{webPod(rev, holdStart, 0, false)})
	rep := webReport(t, a)
	if rep.GetReadiness() != pb.Readiness_READINESS_NOT_READY || !strings.Contains(rep.GetReason(), "ready since 12:00:00 UTC") {
		t.Fatalf("just seen: %v %q", rep.GetReadiness(), rep.GetReason())
	}
	end := holdStart.Add(5*time.Second + 400*time.Millisecond)
	eventually(t, 10*time.Second, "a timer waits for 5 s after the sighting", func() bool { return clock.Waiting(end) })
	clock.Advance(5 * time.Second)
	eventually(t, 10*time.Second, "web ready when the hold ends", func() bool {
		return webReport(t, a).GetReadiness() == pb.Readiness_READINESS_READY
	})

	// kubelet now says ready since 12:00:05 with the same UID and
	// restarts (a blip it did not report): the sighting at 12:00:00.4 is
	// of an earlier run, so the hold counts from 12:00:06.
	a.coord.PodsChanged([]*corev1.Pod{webPod(rev, holdStart.Add(5*time.Second), 0, false)})
	if rep := webReport(t, a); rep.GetReadiness() != pb.Readiness_READINESS_NOT_READY || !strings.Contains(rep.GetReason(), "until 12:00:11 UTC") {
		t.Fatalf("ready again since 12:00:05: %v %q", rep.GetReadiness(), rep.GetReason())
	}
}

// A Pod whose containers all have a readiness probe is ready as soon as
// kubelet says so: kubelet's verdict then rests on the probe.
func TestProbedPodReadyAtOnce(t *testing.T) {
	clock := fakeclock.New(holdStart)
	a, rev := holdNode(t, clock, nil)
	a.coord.PodsChanged([]*corev1.Pod{webPod(rev, holdStart, 0, true)})
	if rep := webReport(t, a); rep.GetReadiness() != pb.Readiness_READINESS_READY {
		t.Fatalf("probed Pod: %v %q", rep.GetReadiness(), rep.GetReason())
	}
}

// A Pod that restarted is ready again only after the hold, counted from
// its new start.
func TestRestartedProbelessPodHoldsAgain(t *testing.T) {
	clock := fakeclock.New(holdStart)
	a, rev := holdNode(t, clock, nil)
	a.coord.PodsChanged([]*corev1.Pod{webPod(rev, holdStart.Add(-time.Minute), 0, false)})
	if rep := webReport(t, a); rep.GetReadiness() != pb.Readiness_READINESS_READY {
		t.Fatalf("ready for a minute: %v %q", rep.GetReadiness(), rep.GetReason())
	}
	clock.Advance(10 * time.Second)
	a.coord.PodsChanged([]*corev1.Pod{webPod(rev, clock.Now(), 1, false)})
	rep := webReport(t, a)
	if rep.GetReadiness() != pb.Readiness_READINESS_NOT_READY || rep.GetRestarts() != 1 || !strings.Contains(rep.GetReason(), "until 12:00:15 UTC") {
		t.Fatalf("just restarted: %v restarts %d %q", rep.GetReadiness(), rep.GetRestarts(), rep.GetReason())
	}
}

// When kubelet gives no time, the hold counts from when the node first saw
// the Pod ready.
func TestProbelessPodWithoutTimesHoldsFromFirstSight(t *testing.T) {
	clock := fakeclock.New(holdStart.Add(500 * time.Millisecond))
	a, rev := holdNode(t, clock, nil)
	p := webPod(rev, time.Time{}, 0, false)
	p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.Time{}
	a.coord.PodsChanged([]*corev1.Pod{p})
	if rep := webReport(t, a); rep.GetReadiness() != pb.Readiness_READINESS_NOT_READY {
		t.Fatalf("just seen: %v %q", rep.GetReadiness(), rep.GetReason())
	}
	end := clock.Now().Add(coordinator.ProbelessHold)
	eventually(t, 10*time.Second, "a timer waits for the hold's end", func() bool { return clock.Waiting(end) })
	// kubelet sends the same Pod again: the hold does not start over.
	clock.Advance(time.Second)
	a.coord.PodsChanged([]*corev1.Pod{p.DeepCopy()})
	clock.Advance(coordinator.ProbelessHold - time.Second)
	eventually(t, 10*time.Second, "web ready when the hold ends", func() bool {
		return webReport(t, a).GetReadiness() == pb.Readiness_READINESS_READY
	})
}

// A negative hold takes kubelet's word at once.
func TestProbelessHoldDisabled(t *testing.T) {
	clock := fakeclock.New(holdStart)
	a, rev := holdNode(t, clock, func(o *coordinator.Options) { o.ProbelessHold = -1 })
	a.coord.PodsChanged([]*corev1.Pod{webPod(rev, holdStart, 0, false)})
	if rep := webReport(t, a); rep.GetReadiness() != pb.Readiness_READINESS_READY {
		t.Fatalf("hold disabled: %v %q", rep.GetReadiness(), rep.GetReason())
	}
}

// A container that exits again after its first restart is reported at
// once, as kubelet reports it between restarts (often before any
// CrashLoopBackOff): the node's report carries a kubelet error naming the
// exit.
func TestFirstExitAfterOneRestartIsReported(t *testing.T) {
	clock := fakeclock.New(holdStart)
	a, rev := holdNode(t, clock, nil)
	p := webPod(rev, holdStart.Add(-time.Minute), 1, true)
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	p.Status.ContainerStatuses[0].Ready = false
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}
	a.coord.PodsChanged([]*corev1.Pod{p})
	rep := webReport(t, a)
	want := "container web: exited with code 1 (Error), 1 restart(s)"
	if rep.GetReadiness() != pb.Readiness_READINESS_NOT_READY || rep.GetError().GetKind() != state.ErrorKubelet || rep.GetError().GetMessage() != want || rep.GetReason() != want {
		t.Fatalf("after the first exit following one restart: %v %q %v", rep.GetReadiness(), rep.GetReason(), rep.GetError())
	}
}

// A pull that failed because the node's own registry refused the
// connection ran while the agent was down (the registry is the agent):
// kubelet pulls again after its back-off and reaches it, so the node
// reports the Pod not ready yet, not an error that would end every
// deploy --wait. The same failure at another registry stays an error.
func TestPullRefusedByTheNodesRegistryIsNotAnError(t *testing.T) {
	const registry = "127.0.0.1:5000"
	refused := func(rev, addr string) *corev1.Pod {
		p := webPod(rev, time.Time{}, 0, true)
		p.Status.Conditions[0].Status = corev1.ConditionFalse
		p.Status.ContainerStatuses[0].Ready = false
		p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull",
			Message: `failed to pull and unpack image "registry.podmin.internal/apps/hello:v3": failed to resolve image: failed to do request: Head "http://` + addr + `/v2/apps/hello/manifests/v3": dial tcp ` + addr + `: connect: connection refused`}}
		return p
	}
	var serving atomic.Value
	serving.Store(registry)
	a, rev := holdNode(t, fakeclock.New(holdStart), func(o *coordinator.Options) { o.NodeRegistry = func() string { return serving.Load().(string) } })
	a.coord.PodsChanged([]*corev1.Pod{refused(rev, registry)})
	rep := webReport(t, a)
	if rep.GetReadiness() != pb.Readiness_READINESS_NOT_READY || rep.GetError() != nil || !strings.Contains(rep.GetReason(), "kubelet pulls the image again: its pull failed while this node's registry was not serving") {
		t.Fatalf("pull refused by the serving node registry: %v %q %v", rep.GetReadiness(), rep.GetReason(), rep.GetError())
	}
	a.coord.PodsChanged([]*corev1.Pod{refused(rev, "10.0.0.9:5000")})
	if rep := webReport(t, a); rep.GetError().GetKind() != state.ErrorKubelet || !strings.Contains(rep.GetError().GetMessage(), "ErrImagePull") {
		t.Fatalf("pull refused by another registry: %v %q %v", rep.GetReadiness(), rep.GetReason(), rep.GetError())
	}
	// While the node's registry does not serve, the refusal is current.
	serving.Store("")
	a.coord.PodsChanged([]*corev1.Pod{refused(rev, registry)})
	if rep := webReport(t, a); rep.GetError().GetKind() != state.ErrorKubelet {
		t.Fatalf("pull refused while the node registry does not serve: %v %q %v", rep.GetReadiness(), rep.GetReason(), rep.GetError())
	}
}
