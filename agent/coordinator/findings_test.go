// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/clock/fakeclock"
	"podmin.dev/podmin/internal/state"
)

// A Pod kubelet reports not ready carries what the node found out about
// it (the failing probe and its answer), and a kubelet that stopped
// answering is reported as down with what to check, not as progress.
func TestReportNamesWhyAPodIsNotReady(t *testing.T) {
	clock := fakeclock.New(holdStart)
	a, rev := holdNode(t, clock, nil)
	pod := webPod(rev, holdStart, 0, true)
	pod.Status.Conditions[0].Status = corev1.ConditionFalse
	pod.Status.ContainerStatuses[0].Ready = false
	a.coord.PodsChanged([]*corev1.Pod{pod})
	if rep := webReport(t, a); rep.GetReadiness() != pb.Readiness_READINESS_NOT_READY || rep.GetReason() != "kubelet reports the Pod not ready" {
		t.Fatalf("before a finding: %v %q", rep.GetReadiness(), rep.GetReason())
	}
	const finding = "container web: readiness probe HTTPS GET https://[2001:db8::5]:8443/healthz fails: connection refused"
	a.coord.PodFindings(map[types.UID]string{pod.UID: finding, "another": "not this Pod's"})
	if rep := webReport(t, a); rep.GetReason() != "kubelet reports the Pod not ready: "+finding {
		t.Fatalf("with a finding: %q", rep.GetReason())
	}

	a.coord.KubeletLost(errors.New("connection refused"))
	rep := webReport(t, a)
	if rep.GetReadiness() != pb.Readiness_READINESS_UNKNOWN || !strings.HasPrefix(rep.GetReason(), "kubelet is down") ||
		!strings.Contains(rep.GetReason(), "systemctl status kubelet") {
		t.Fatalf("kubelet gone: %v %q", rep.GetReadiness(), rep.GetReason())
	}
}

// A node that has just started and waits for the workload CA reports its
// deployment not ready with that reason, and no error.
func TestStartingIsNoError(t *testing.T) {
	clock := fakeclock.New(holdStart)
	a, rev := holdNode(t, clock, nil)
	k, _ := state.NewKey("workers", "web")
	const why = "starting: the workload CA is not readable yet, so its identity cannot be issued"
	a.coord.DeploymentsChanged([]staticpod.DeploymentState{{Deployment: k, Pod: "web", Namespace: "default", Desired: rev, Starting: why}})
	rep := webReport(t, a)
	if rep.GetReadiness() != pb.Readiness_READINESS_NOT_READY || rep.GetReason() != why || rep.GetError() != nil {
		t.Fatalf("starting: %v %q error %v", rep.GetReadiness(), rep.GetReason(), rep.GetError())
	}
}
