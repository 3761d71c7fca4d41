// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var t0 = time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)

// unready is a Pod whose container web runs since start and is not ready,
// with probe as its readiness probe, at 127.0.0.1.
func unready(uid string, start time.Time, probe *corev1.Probe) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node", Namespace: "default", UID: types.UID(uid)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", ReadinessProbe: probe,
			Ports: []corev1.ContainerPort{{Name: "https", ContainerPort: 8443}}}}},
		Status: corev1.PodStatus{
			PodIP:      "127.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: false,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(start)}}}},
		},
	}
}

func httpProbe(scheme corev1.URIScheme, port int) *corev1.Probe {
	return &corev1.Probe{PeriodSeconds: 2, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Scheme: scheme, Path: "/healthz", Port: intstr.FromInt32(int32(port))}}}
}

// recorder keeps the last findings and disk report a Diagnoser gave.
type recorder struct {
	mu       sync.Mutex
	findings map[types.UID]string
	disk     error
	calls    int
}

func (r *recorder) diagnoser(statfs func(string) (uint64, uint64, error)) *Diagnoser {
	return New(Options{Root: "/node", Statfs: statfs, Now: func() time.Time { return t0 },
		Findings: func(f map[types.UID]string) { r.mu.Lock(); r.findings = f; r.calls++; r.mu.Unlock() },
		Disk:     func(err error) { r.mu.Lock(); r.disk = err; r.mu.Unlock() }})
}

func plenty(string) (uint64, uint64, error) { return 10 << 30, 20 << 30, nil }

// closedPort is a local TCP port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func serverPort(t *testing.T, s *httptest.Server) int {
	t.Helper()
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return n
}

// Each kind of readiness probe that fails is named with its address and
// port and what it answered; one that answers is reported as answering;
// an exec probe is named, not run.
func TestFindingsNameTheProbeAndItsAnswer(t *testing.T) {
	failing := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "database unreachable", http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer healthy.Close()
	refused := closedPort(t)
	listening, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listening.Close()
	named := &corev1.Probe{PeriodSeconds: 2, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("https")}}}
	for name, tc := range map[string]struct {
		probe *corev1.Probe
		want  string
	}{
		"https 503": {httpProbe(corev1.URISchemeHTTPS, serverPort(t, failing)),
			"container web: readiness probe HTTPS GET https://127.0.0.1:" + strconv.Itoa(serverPort(t, failing)) + "/healthz fails: HTTP 503: database unreachable"},
		"http refused": {httpProbe(corev1.URISchemeHTTP, refused),
			"readiness probe HTTP GET http://127.0.0.1:" + strconv.Itoa(refused) + "/healthz fails: connection refused"},
		"tcp refused": {&corev1.Probe{PeriodSeconds: 2, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(refused))}}},
			"readiness probe TCP connect to 127.0.0.1:" + strconv.Itoa(refused) + " fails: connection refused"},
		"named port": {named, "readiness probe TCP connect to 127.0.0.1:8443 fails"},
		"answers":    {httpProbe(corev1.URISchemeHTTP, serverPort(t, healthy)), "kubelet reports it not ready, but its readiness probe HTTP GET"},
		"exec": {&corev1.Probe{PeriodSeconds: 2, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/ready"}}}},
			"its readiness probe (exec cat /ready) fails by kubelet's account; an exec probe runs inside the container"},
	} {
		t.Run(name, func(t *testing.T) {
			r := &recorder{}
			d := r.diagnoser(plenty)
			d.Update([]*corev1.Pod{unready("u1", t0.Add(-time.Minute), tc.probe)})
			d.Round(context.Background())
			if got := r.findings["u1"]; !strings.Contains(got, tc.want) {
				t.Fatalf("finding %q, want it to contain %q", got, tc.want)
			}
		})
	}
}

// A container that has not run past its probe's initial delay and one
// period is not probed (kubelet may not have tried yet), nor is a ready
// Pod; findings are reported only when they change.
func TestOnlyLongUnreadyContainersAreProbed(t *testing.T) {
	var hits int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	probe := httpProbe(corev1.URISchemeHTTP, serverPort(t, srv))
	probe.InitialDelaySeconds = 10
	young := unready("young", t0.Add(-11*time.Second), probe) // 10 s delay + 2 s period not over
	readyPod := unready("ready", t0.Add(-time.Hour), probe)
	readyPod.Status.Conditions[0].Status = corev1.ConditionTrue
	r := &recorder{}
	d := r.diagnoser(plenty)
	d.Update([]*corev1.Pod{young, readyPod})
	d.Round(context.Background())
	d.Round(context.Background())
	if hits != 0 || len(r.findings) != 0 || r.calls != 1 {
		t.Fatalf("probes %d, findings %v after %d reports; want none probed and one empty report", hits, r.findings, r.calls)
	}
	old := unready("old", t0.Add(-12*time.Second), probe)
	d.Update([]*corev1.Pod{young, readyPod, old})
	d.Round(context.Background())
	d.Round(context.Background())
	if hits != 2 || len(r.findings) != 1 || !strings.Contains(r.findings["old"], "HTTP 500") || r.calls != 2 {
		t.Fatalf("probes %d, findings %v after %d reports; want old probed each round, reported once", hits, r.findings, r.calls)
	}
}

// A full disk is reported on its own (for /readyz) and beside every Pod
// that is not ready, and clears when space is freed.
func TestFullDiskIsReportedAsSuch(t *testing.T) {
	var mu sync.Mutex
	free := uint64(3 << 20)
	statfs := func(path string) (uint64, uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasSuffix(path, "/var/log") {
			return 0, 0, errors.New("no such file or directory")
		}
		return free, 20 << 30, nil
	}
	pod := unready("u1", t0.Add(-time.Minute), nil)
	pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	r := &recorder{}
	d := r.diagnoser(statfs)
	d.Update([]*corev1.Pod{pod})
	d.Round(context.Background())
	want := "the node's disk is full (/node/var/lib/containerd has 3.0 MiB free of 20.0 GiB)"
	if r.disk == nil || !strings.Contains(r.disk.Error(), want) || !strings.Contains(r.findings["u1"], want) {
		t.Fatalf("disk %v, finding %q, want both to say %q", r.disk, r.findings["u1"], want)
	}
	mu.Lock()
	free = 5 << 30
	mu.Unlock()
	d.Round(context.Background())
	if r.disk != nil || len(r.findings) != 0 {
		t.Fatalf("after freeing space: disk %v, findings %v", r.disk, r.findings)
	}
}
