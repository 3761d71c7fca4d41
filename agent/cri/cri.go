// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package cri

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/nodepod"
)

// ContainerdSocket is the node's containerd CRI endpoint, relative to the
// node root (the bootstrap's containerd configuration and crictl.yaml).
const ContainerdSocket = "/run/podmin/containerd/containerd.sock"

// prepullConcurrency bounds the images pulled at once.
const prepullConcurrency = 4

// Runtime is the reconciler's view of the container runtime over CRI.
// As its staticpod.Prepuller it pulls images through the CRI image
// service, exactly as kubelet pulls them (from the node registry), so that
// a static Pod's restart onto a new version does not wait for its
// download; as its staticpod.Stopper it tells when a replaced Pod's
// sandbox stopped.
type Runtime struct {
	// Socket is the CRI endpoint's unix socket.
	Socket string
	Log    *slog.Logger
}

// New returns the CRI client of the node beneath root.
func New(root string, log *slog.Logger) *Runtime {
	return &Runtime{Socket: filepath.Join(root, filepath.FromSlash(ContainerdSocket)), Log: log.With("component", "cri")}
}

// Prepull pulls every image, a few at a time, and returns each failure
// by image. On a node without the runtime's socket (local node mode
// without containerd) it pulls nothing and answers staticpod.ErrNoRuntime.
func (p *Runtime) Prepull(ctx context.Context, images []string) (map[string]error, error) {
	conn, err := p.dial()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	client := runtimeapi.NewImageServiceClient(conn)
	errs := make([]error, len(images))
	var g errgroup.Group
	g.SetLimit(prepullConcurrency)
	for i, img := range images {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				errs[i] = fmt.Errorf("pull %s: %w", img, err)
				return nil
			}
			resp, err := client.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: img}})
			if err != nil {
				errs[i] = fmt.Errorf("pull %s through %s: %w", img, p.Socket, err)
				return nil
			}
			p.Log.Debug("image pre-pulled", "image", img, "ref", resp.GetImageRef())
			return nil
		})
	}
	_ = g.Wait() // the errors are in errs
	failed := map[string]error{}
	for i, err := range errs {
		if err != nil {
			failed[images[i]] = err
		}
	}
	return failed, nil
}

// stopPoll is how often WaitStopped asks the runtime again.
const stopPoll = 100 * time.Millisecond

// CanTell implements staticpod.Stopper: the runtime's socket exists.
func (p *Runtime) CanTell() bool {
	fi, err := os.Stat(p.Socket)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// dial connects to the runtime's CRI socket; without the socket it
// answers staticpod.ErrNoRuntime.
func (p *Runtime) dial() (*grpc.ClientConn, error) {
	if !p.CanTell() {
		return nil, fmt.Errorf("%w: no socket at %s", staticpod.ErrNoRuntime, p.Socket)
	}
	conn, err := grpc.NewClient("unix://"+p.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("container runtime at %s: %w", p.Socket, err)
	}
	return conn, nil
}

// WaitStopped implements staticpod.Stopper: it asks the runtime's CRI
// service every stopPoll for ready sandboxes of the Pod (kubelet names a
// static Pod's sandbox <name>-<node> and gives it the Pod's annotations,
// the revision among them) and returns once there is none.
func (p *Runtime) WaitStopped(ctx context.Context, namespace, name, revision string) error {
	conn, err := p.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	client := runtimeapi.NewRuntimeServiceClient(conn)
	filter := &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{"io.kubernetes.pod.namespace": namespace},
	}
	for {
		resp, err := client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("list the Pod sandboxes at %s: %w", p.Socket, err)
		}
		if !runsPod(resp.GetItems(), name, revision) {
			return nil
		}
		t := time.NewTimer(stopPoll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// runsPod reports whether a sandbox is the static Pod name at revision.
func runsPod(sandboxes []*runtimeapi.PodSandbox, name, revision string) bool {
	for _, s := range sandboxes {
		n := s.GetMetadata().GetName()
		if (n == name || strings.HasPrefix(n, name+"-")) && s.GetAnnotations()[nodepod.RevisionAnnotation] == revision {
			return true
		}
	}
	return false
}
