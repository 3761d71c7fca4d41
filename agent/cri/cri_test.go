// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package cri

import (
	"context"
	"errors"
	"log/slog"
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
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"podmin.dev/podmin/agent/staticpod"
)

// fakeImageService is a CRI image service that knows some images; it
// speaks the real protocol over a unix socket.
type fakeImageService struct {
	runtimeapi.UnimplementedImageServiceServer
	known map[string]string
	mu    sync.Mutex
	asked []string
}

func (f *fakeImageService) PullImage(_ context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	img := req.GetImage().GetImage()
	f.mu.Lock()
	f.asked = append(f.asked, img)
	f.mu.Unlock()
	ref, ok := f.known[img]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "%s: not found", img)
	}
	return &runtimeapi.PullImageResponse{ImageRef: ref}, nil
}

func serveImages(t *testing.T, root string, f *fakeImageService) {
	t.Helper()
	serveCRI(t, root, func(srv *grpc.Server) { runtimeapi.RegisterImageServiceServer(srv, f) })
}

// serveCRI serves the services register adds on the node's containerd
// socket beneath root.
func serveCRI(t *testing.T, root string, register func(*grpc.Server)) {
	t.Helper()
	sock := filepath.Join(root, filepath.FromSlash(ContainerdSocket))
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("no unix socket at %s: %v", sock, err)
	}
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
}

func TestRuntimePullsEveryImage(t *testing.T) {
	root := t.TempDir()
	f := &fakeImageService{known: map[string]string{"r/a:v1": "sha256:a", "r/b:v1": "sha256:b"}}
	serveImages(t, root, f)
	p := New(root, slog.New(slog.DiscardHandler))
	if failed, err := p.Prepull(context.Background(), []string{"r/a:v1", "r/b:v1"}); err != nil || len(failed) != 0 {
		t.Fatal(failed, err)
	}
	failed, err := p.Prepull(context.Background(), []string{"r/a:v1", "r/missing:v1"})
	if err != nil || len(failed) != 1 || failed["r/missing:v1"] == nil || !strings.Contains(failed["r/missing:v1"].Error(), "pull r/missing:v1 through") {
		t.Fatalf("failed = %v, %v, want only r/missing:v1", failed, err)
	}
	slices.Sort(f.asked)
	if want := []string{"r/a:v1", "r/a:v1", "r/b:v1", "r/missing:v1"}; !slices.Equal(f.asked, want) {
		t.Fatalf("runtime asked for %q, want %q", f.asked, want)
	}
}

func TestRuntimeWithoutRuntimePullsNothing(t *testing.T) {
	p := New(t.TempDir(), slog.New(slog.DiscardHandler))
	if _, err := p.Prepull(context.Background(), []string{"r/a:v1"}); !errors.Is(err, staticpod.ErrNoRuntime) {
		t.Fatalf("no runtime socket: %v, want staticpod.ErrNoRuntime", err)
	}
}

func TestRuntimeStopsAtTheDeadline(t *testing.T) {
	root := t.TempDir()
	serveImages(t, root, &fakeImageService{known: map[string]string{"r/a:v1": "sha256:a"}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	failed, _ := New(root, slog.New(slog.DiscardHandler)).Prepull(ctx, []string{"r/a:v1"})
	err := failed["r/a:v1"]
	if err == nil || !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "code = Canceled") {
		t.Fatalf("err = %v, want the cancellation", err)
	}
}

// fakeRuntimeService is a CRI runtime service holding sandboxes; it
// applies the state and label filters as containerd does.
type fakeRuntimeService struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	mu        sync.Mutex
	sandboxes []*runtimeapi.PodSandbox
	lists     int
}

func (f *fakeRuntimeService) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	var out []*runtimeapi.PodSandbox
	for _, s := range f.sandboxes {
		if st := req.GetFilter().GetState(); st != nil && st.GetState() != s.GetState() {
			continue
		}
		match := true
		for k, v := range req.GetFilter().GetLabelSelector() {
			if s.GetLabels()[k] != v {
				match = false
			}
		}
		if match {
			out = append(out, s)
		}
	}
	return &runtimeapi.ListPodSandboxResponse{Items: out}, nil
}

func (f *fakeRuntimeService) set(s []*runtimeapi.PodSandbox) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sandboxes = s
}

func sandbox(namespace, name, revision string, state runtimeapi.PodSandboxState) *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{
		Metadata:    &runtimeapi.PodSandboxMetadata{Name: name, Namespace: namespace},
		State:       state,
		Labels:      map[string]string{"io.kubernetes.pod.namespace": namespace, "io.kubernetes.pod.name": name},
		Annotations: map[string]string{"podmin.dev/revision": revision},
	}
}

// WaitStopped returns once no ready sandbox of the static Pod at the
// revision is left, whatever else runs: another revision's stopped
// sandbox, another Pod whose name starts alike, the same name in another
// namespace.
func TestWaitStoppedWaitsForTheRevisionsSandbox(t *testing.T) {
	root := t.TempDir()
	f := &fakeRuntimeService{}
	serveCRI(t, root, func(srv *grpc.Server) { runtimeapi.RegisterRuntimeServiceServer(srv, f) })
	others := []*runtimeapi.PodSandbox{
		sandbox("default", "web-node-1", "r0", runtimeapi.PodSandboxState_SANDBOX_NOTREADY),
		sandbox("default", "webx-node-1", "r1", runtimeapi.PodSandboxState_SANDBOX_READY),
		sandbox("other", "web-node-1", "r1", runtimeapi.PodSandboxState_SANDBOX_READY),
	}
	f.set(append([]*runtimeapi.PodSandbox{sandbox("default", "web-node-1", "r1", runtimeapi.PodSandboxState_SANDBOX_READY)}, others...))
	p := New(root, slog.New(slog.DiscardHandler))

	done := make(chan error, 1)
	go func() { done <- p.WaitStopped(context.Background(), "default", "web", "r1") }()
	select {
	case err := <-done:
		t.Fatalf("returned while the sandbox runs: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	f.set(others)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting after the sandbox stopped")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	f.set(append(others, sandbox("default", "web-node-1", "r2", runtimeapi.PodSandboxState_SANDBOX_READY)))
	if err := p.WaitStopped(ctx, "default", "web", "r2"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a sandbox that never stops: %v, want the deadline", err)
	}
	if err := New(t.TempDir(), slog.New(slog.DiscardHandler)).WaitStopped(context.Background(), "default", "web", "r1"); !errors.Is(err, staticpod.ErrNoRuntime) {
		t.Fatalf("no runtime socket: %v, want staticpod.ErrNoRuntime", err)
	}
}
