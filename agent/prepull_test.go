// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

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
	sock := filepath.Join(root, filepath.FromSlash(ContainerdSocket))
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("no unix socket at %s: %v", sock, err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterImageServiceServer(srv, f)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
}

func TestCRIPullerPullsEveryImage(t *testing.T) {
	root := t.TempDir()
	f := &fakeImageService{known: map[string]string{"r/a:v1": "sha256:a", "r/b:v1": "sha256:b"}}
	serveImages(t, root, f)
	p := newPrepuller(root, slog.New(slog.DiscardHandler))
	if err := p.Prepull(context.Background(), []string{"r/a:v1", "r/b:v1"}); err != nil {
		t.Fatal(err)
	}
	err := p.Prepull(context.Background(), []string{"r/a:v1", "r/missing:v1"})
	if err == nil || !strings.Contains(err.Error(), "pull r/missing:v1 through") || strings.Contains(err.Error(), "r/a:v1") {
		t.Fatalf("err = %v, want only r/missing:v1 named", err)
	}
	slices.Sort(f.asked)
	if want := []string{"r/a:v1", "r/a:v1", "r/b:v1", "r/missing:v1"}; !slices.Equal(f.asked, want) {
		t.Fatalf("runtime asked for %q, want %q", f.asked, want)
	}
}

func TestCRIPullerWithoutRuntimePullsNothing(t *testing.T) {
	p := newPrepuller(t.TempDir(), slog.New(slog.DiscardHandler))
	if err := p.Prepull(context.Background(), []string{"r/a:v1"}); !errors.Is(err, staticpod.ErrNoRuntime) {
		t.Fatalf("no runtime socket: %v, want staticpod.ErrNoRuntime", err)
	}
}

func TestCRIPullerStopsAtTheDeadline(t *testing.T) {
	root := t.TempDir()
	serveImages(t, root, &fakeImageService{known: map[string]string{"r/a:v1": "sha256:a"}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := newPrepuller(root, slog.New(slog.DiscardHandler)).Prepull(ctx, []string{"r/a:v1"})
	if err == nil || !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "code = Canceled") {
		t.Fatalf("err = %v, want the cancellation", err)
	}
}
