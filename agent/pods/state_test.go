// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package pods_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"podmin.dev/podmin/agent/pods"
)

func TestStateOf(t *testing.T) {
	crashing := pod("default", "web-1", false, nil)
	crashing.Annotations = map[string]string{"podmin.dev/revision": "r2"}
	crashing.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "web", RestartCount: 4,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}},
	}, {Name: "sidecar", RestartCount: 1}}
	s := pods.StateOf(crashing)
	if s.Ready || s.Restarts != 5 || s.Problem != "container web: CrashLoopBackOff: back-off 40s restarting failed container (last exit code 1, Error)" {
		t.Fatalf("crashing Pod: %+v", s)
	}
	if pods.Revision(crashing) != "r2" {
		t.Fatalf("revision %q", pods.Revision(crashing))
	}

	starting := pod("default", "web-2", false, nil)
	starting.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	if s := pods.StateOf(starting); s.Problem != "" || s.Ready {
		t.Fatalf("a Pod being created reports %+v", s)
	}

	pulling := pod("default", "web-3", false, nil)
	pulling.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
	if s := pods.StateOf(pulling); s.Problem != "container init: ImagePullBackOff" {
		t.Fatalf("a Pod whose image cannot be pulled: %+v", s)
	}

	ready := pod("default", "web-4", true, nil)
	if s := pods.StateOf(ready); !s.Ready || s.Problem != "" || pods.Revision(ready) != "" {
		t.Fatalf("a ready Pod: %+v", s)
	}

	// Between restarts kubelet may report the container terminated rather
	// than in CrashLoopBackOff: after a restart that is a failure too, for
	// a regular container whatever its exit code (the Pod restarts always),
	// for an init container only with a non-zero one.
	exited := pod("default", "web-6", false, nil)
	exited.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", RestartCount: 1,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}
	exited.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "web", RestartCount: 4, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}},
		{Name: "done", RestartCount: 2, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}},
	}
	if s := pods.StateOf(exited); s.Restarts != 7 || s.Problem != "container web: exited with code 3 (Error), 4 restart(s); container done: exited with code 0 (Completed), 2 restart(s)" {
		t.Fatalf("a Pod whose containers exited after restarts: %+v", s)
	}
	first := pod("default", "web-7", false, nil)
	first.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}
	if s := pods.StateOf(first); s.Problem != "" {
		t.Fatalf("a container that exited for the first time (kubelet restarts it) is not yet a failure: %+v", s)
	}

	failed := pod("default", "web-5", false, nil)
	failed.Status.Phase, failed.Status.Reason = corev1.PodFailed, "Evicted"
	if s := pods.StateOf(failed); s.Problem != "the Pod failed: Evicted" {
		t.Fatalf("a failed Pod: %+v", s)
	}
}

// A kubelet that stops answering is reported through Lost, and the Pods
// it serves again through Refresh.
func TestWatcherReportsALostKubelet(t *testing.T) {
	k, sock := serveKubelet(t, map[string]*corev1.Pod{"a": pod("product", "web-1", true, nil)})
	lost := make(chan error, 10)
	refreshed := make(chan int, 100)
	w := pods.New(pods.Options{Socket: sock, Relist: 5 * time.Millisecond,
		Refresh: func(ps []*corev1.Pod) { refreshed <- len(ps) },
		Lost:    func(err error) { lost <- err }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case n := <-refreshed:
		if n != 1 {
			t.Fatalf("first refresh with %d Pods", n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no refresh")
	}
	k.srv.Stop()
	select {
	case err := <-lost:
		if err == nil {
			t.Fatal("Lost with a nil error")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a stopped kubelet was not reported lost")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestHasReadinessProbes(t *testing.T) {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}}
	always := corev1.ContainerRestartPolicyAlways
	for _, c := range []struct {
		name string
		spec corev1.PodSpec
		want bool
	}{
		{"no spec", corev1.PodSpec{}, false},
		{"probed", corev1.PodSpec{Containers: []corev1.Container{{Name: "web", ReadinessProbe: probe}}}, true},
		{"one of two unprobed", corev1.PodSpec{Containers: []corev1.Container{{Name: "web", ReadinessProbe: probe}, {Name: "log"}}}, false},
		{"plain init container unprobed", corev1.PodSpec{InitContainers: []corev1.Container{{Name: "init"}},
			Containers: []corev1.Container{{Name: "web", ReadinessProbe: probe}}}, true},
		{"sidecar unprobed", corev1.PodSpec{InitContainers: []corev1.Container{{Name: "proxy", RestartPolicy: &always}},
			Containers: []corev1.Container{{Name: "web", ReadinessProbe: probe}}}, false},
	} {
		p := pod("default", "web-1", true, nil)
		p.Spec = c.spec
		if got := pods.HasReadinessProbes(p); got != c.want {
			t.Errorf("%s: HasReadinessProbes = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestReadySince(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	p := pod("default", "web-1", true, nil)
	if from, to := pods.ReadySince(p); !from.IsZero() || !to.IsZero() {
		t.Fatalf("no times: %v %v", from, to)
	}
	// A whole-second time stands for its whole second.
	p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(at)
	if from, to := pods.ReadySince(p); !from.Equal(at) || !to.Equal(at.Add(time.Second)) {
		t.Fatalf("condition only: %v %v", from, to)
	}
	// A container started later than the condition moved: its start
	// counts, and a time with a fraction is exact.
	started := at.Add(3*time.Second + 250*time.Millisecond)
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}
	if from, to := pods.ReadySince(p); !from.Equal(started) || !to.Equal(started) {
		t.Fatalf("restarted container: %v %v", from, to)
	}
	// A Pod that is not ready has no such time.
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	if from, to := pods.ReadySince(p); !from.IsZero() || !to.IsZero() {
		t.Fatalf("not ready: %v %v", from, to)
	}
}

// Only a pull refused at the node registry's own address, while the
// agent serves it, is one kubelet retries with success; any other pull
// failure is a problem.
func TestStateOfWithNodeRegistry(t *testing.T) {
	waiting := func(reason, msg string) *corev1.Pod {
		p := pod("default", "web-1", false, nil)
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
		return p
	}
	const refused = `Back-off pulling image "registry.podmin.internal/apps/hello:v3": ErrImagePull: failed to do request: Head "http://127.0.0.1:5000/v2/apps/hello/manifests/v3": dial tcp 127.0.0.1:5000: connect: connection refused`
	o := pods.StateOptions{NodeRegistry: "127.0.0.1:5000"}
	for _, tc := range []struct {
		name, reason, msg string
		opts              pods.StateOptions
		retrying          bool
	}{
		{"back-off after a refused pull", "ImagePullBackOff", refused, o, true},
		{"refused pull", "ErrImagePull", refused, o, true},
		{"registry not serving", "ImagePullBackOff", refused, pods.StateOptions{}, false},
		{"another registry", "ErrImagePull", refused, pods.StateOptions{NodeRegistry: "127.0.0.1:5001"}, false},
		{"not found", "ErrImagePull", `failed to pull: registry.podmin.internal/apps/hello:v3: not found`, o, false},
		{"crash loop naming the address", "CrashLoopBackOff", refused, o, false},
	} {
		s := pods.StateOfWith(waiting(tc.reason, tc.msg), tc.opts)
		if got := s.Retrying != ""; got != tc.retrying || (s.Problem == "") != tc.retrying {
			t.Errorf("%s: %+v", tc.name, s)
		}
	}
}
