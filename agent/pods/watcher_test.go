// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package pods_test

import (
	"context"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podsapi "k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"podmin.dev/podmin/agent/pods"
)

// fakeKubelet serves the real generated Pods service over a unix socket
// the way kubelet 1.36 does (pkg/kubelet/apis/pods/server.go): WatchPods
// sends the current Pods as ADDED events in UID order,
// INITIAL_SYNC_COMPLETE, then whatever arrives on events until drop is
// closed, when it ends the stream as kubelet ends a watcher that fell
// behind. watches counts the streams opened.
type fakeKubelet struct {
	podsapi.UnimplementedPodsServer
	mu      sync.Mutex
	current map[string]*corev1.Pod
	events  chan *podsapi.WatchPodsEvent
	drop    chan struct{}
	lists   int
	watches int
	// srv serves it; stopping it is a kubelet that went away.
	srv *grpc.Server
}

func (k *fakeKubelet) snapshot() [][]byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	ps := slices.Collect(maps.Values(k.current))
	slices.SortFunc(ps, func(a, b *corev1.Pod) int { return strings.Compare(string(a.UID), string(b.UID)) })
	var out [][]byte
	for _, p := range ps {
		b, _ := p.Marshal()
		out = append(out, b)
	}
	return out
}

func (k *fakeKubelet) WatchPods(_ *podsapi.WatchPodsRequest, s grpc.ServerStreamingServer[podsapi.WatchPodsEvent]) error {
	k.mu.Lock()
	k.watches++
	k.mu.Unlock()
	for _, b := range k.snapshot() {
		if err := s.Send(&podsapi.WatchPodsEvent{Type: podsapi.EventType_ADDED, Pod: b}); err != nil {
			return err
		}
	}
	if err := s.Send(&podsapi.WatchPodsEvent{Type: podsapi.EventType_INITIAL_SYNC_COMPLETE}); err != nil {
		return err
	}
	k.mu.Lock()
	drop := k.drop
	k.mu.Unlock()
	for {
		select {
		case ev := <-k.events:
			if err := s.Send(ev); err != nil {
				return err
			}
		case <-drop:
			return status.Error(codes.ResourceExhausted, "watch client channel closed")
		case <-s.Context().Done():
			return nil
		}
	}
}

func (k *fakeKubelet) ListPods(context.Context, *podsapi.ListPodsRequest) (*podsapi.ListPodsResponse, error) {
	k.mu.Lock()
	k.lists++
	k.mu.Unlock()
	return &podsapi.ListPodsResponse{Pods: k.snapshot()}, nil
}

func pod(ns, name string, ready bool, labels map[string]string) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), Labels: labels},
		Status: corev1.PodStatus{
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
			PodIPs:     []corev1.PodIP{{IP: "2001:db8::" + name[len(name)-1:]}},
		},
	}
}

func event(t corev1.Pod, typ podsapi.EventType) *podsapi.WatchPodsEvent {
	if typ == podsapi.EventType_DELETED {
		// kubelet sends a finished Pod's name, namespace and UID only.
		t = corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: t.Name, Namespace: t.Namespace, UID: t.UID}}
	}
	b, _ := t.Marshal()
	return &podsapi.WatchPodsEvent{Type: typ, Pod: b}
}

func names(rs []pods.Ready) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Namespace+"/"+r.Name)
	}
	return out
}

// serveKubelet serves a fake kubelet with the given Pods on a unix socket
// and returns it and the socket's path.
func serveKubelet(t *testing.T, current map[string]*corev1.Pod) (*fakeKubelet, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "pods")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "pods-api.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{current: current, events: make(chan *podsapi.WatchPodsEvent), drop: make(chan struct{}), srv: grpc.NewServer()}
	podsapi.RegisterPodsServer(k.srv, k)
	go func() { _ = k.srv.Serve(ln) }()
	t.Cleanup(k.srv.Stop)
	return k, sock
}

// runWatcher runs a watcher with opts (its Refresh is the test's) until the
// test ends, and returns it with a wait for what it selects with sel.
func runWatcher(t *testing.T, opts pods.Options, sel pods.Selector) (*pods.Watcher, func(what string, want []string)) {
	t.Helper()
	refreshed := make(chan []*corev1.Pod, 100)
	opts.Refresh = func(ps []*corev1.Pod) { refreshed <- ps }
	w := pods.New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return w, func(what string, want []string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case <-refreshed:
				if got := names(w.Select(sel)); slices.Equal(got, want) {
					return
				}
			case <-deadline:
				t.Fatalf("%s: selected %q, want %q", what, names(w.Select(sel)), want)
			}
		}
	}
}

func TestWatcherAgainstTheKubeletPodsAPI(t *testing.T) {
	app := map[string]string{"app": "web"}
	k, sock := serveKubelet(t, map[string]*corev1.Pod{
		"a": pod("product", "web-1", true, app),
		"b": pod("product", "web-2", false, app),
		"c": pod("other", "web-3", true, app),
		"d": pod("product", "db-4", true, map[string]string{"app": "db"}),
	})
	sel := pods.Selector{Namespace: "product", Labels: app}
	w, waitFor := runWatcher(t, pods.Options{Socket: sock, Relist: 5 * time.Millisecond}, sel)
	waitFor("initial sync", []string{"product/web-1"})
	if r := w.Select(sel); r[0].IPs[0] != "2001:db8::1" {
		t.Fatalf("ready %+v", r)
	}

	// Kubelet reports web-2 ready, then web-1 deleted.
	k.events <- event(*pod("product", "web-2", true, app), podsapi.EventType_MODIFIED)
	waitFor("web-2 ready", []string{"product/web-1", "product/web-2"})
	k.events <- event(*pod("product", "web-1", true, app), podsapi.EventType_DELETED)
	waitFor("web-1 deleted", []string{"product/web-2"})

	// The stream drops while kubelet's state moves on: the watcher relists.
	k.mu.Lock()
	k.current = map[string]*corev1.Pod{"e": pod("product", "web-5", true, app)}
	close(k.drop)
	k.drop = make(chan struct{})
	k.mu.Unlock()
	waitFor("relist after a disconnect", []string{"product/web-5"})
	k.mu.Lock()
	lists := k.lists
	k.mu.Unlock()
	if lists == 0 {
		t.Fatal("no relist after the disconnect")
	}
}

func TestSelect(t *testing.T) {
	app := map[string]string{"app": "web", "tier": "front"}
	ps := []*corev1.Pod{
		pod("default", "b-1", true, app),
		pod("default", "a-2", true, map[string]string{"app": "web", "tier": "front", "extra": "x"}),
		pod("default", "c-3", true, map[string]string{"app": "web"}),
		pod("", "d-4", true, app),
		pod("default", "e-5", false, app),
	}
	got := names(pods.Select(ps, pods.Selector{Namespace: "default", Labels: app}))
	if !slices.Equal(got, []string{"default/a-2", "default/b-1", "default/d-4"}) {
		t.Fatalf("selected %q", got)
	}
	if got := pods.Select(ps, pods.Selector{Namespace: "default"}); len(got) != 0 {
		t.Fatalf("an empty selector selected %q", names(got))
	}
}

// TestWatcherResumesADroppedStreamAtOnce: kubelet ends a healthy stream
// (a watcher that fell behind); the watcher relists and watches again
// without waiting a relist period, and sees the next update.
func TestWatcherResumesADroppedStreamAtOnce(t *testing.T) {
	app := map[string]string{"app": "web"}
	k, sock := serveKubelet(t, map[string]*corev1.Pod{"a": pod("default", "web-1", true, app)})
	waits := make(chan time.Duration, 10)
	_, waitFor := runWatcher(t, pods.Options{Socket: sock, Relist: 10 * time.Millisecond,
		After: func(d time.Duration) <-chan time.Time { waits <- d; return nil }, // a period never ends
	}, pods.Selector{Namespace: "default", Labels: app})
	waitFor("initial sync", []string{"default/web-1"})
	time.Sleep(20 * time.Millisecond) // the stream outlives a relist period
	k.mu.Lock()
	close(k.drop)
	k.drop = make(chan struct{})
	k.mu.Unlock()
	k.events <- event(*pod("default", "web-2", true, app), podsapi.EventType_ADDED) // only a new stream receives it
	waitFor("the update on the resumed stream", []string{"default/web-1", "default/web-2"})
	select {
	case d := <-waits:
		t.Fatalf("the watcher waited %v before watching again", d)
	default:
	}
	k.mu.Lock()
	watches, lists := k.watches, k.lists
	k.mu.Unlock()
	if watches != 2 || lists != 1 {
		t.Fatalf("%d streams and %d relists, want 2 and 1", watches, lists)
	}
}
