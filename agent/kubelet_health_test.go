// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	podsapi "k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"podmin.dev/podmin/agent/pods"
)

// fakePodsAPI is kubelet's Pods API with no Pods, over the real generated
// service: a list, and a watch that syncs and then stays open.
type fakePodsAPI struct {
	podsapi.UnimplementedPodsServer
}

func (fakePodsAPI) ListPods(context.Context, *podsapi.ListPodsRequest) (*podsapi.ListPodsResponse, error) {
	return &podsapi.ListPodsResponse{}, nil
}

func (fakePodsAPI) WatchPods(_ *podsapi.WatchPodsRequest, s grpc.ServerStreamingServer[podsapi.WatchPodsEvent]) error {
	if err := s.Send(&podsapi.WatchPodsEvent{Type: podsapi.EventType_INITIAL_SYNC_COMPLETE}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// serveFakePodsAPI serves fakePodsAPI at the Pods API socket beneath root.
func serveFakePodsAPI(t *testing.T, root string) *grpc.Server {
	t.Helper()
	sock := filepath.Join(root, filepath.FromSlash(pods.SocketPath))
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("no unix socket at %s: %v", sock, err)
	}
	srv := grpc.NewServer()
	podsapi.RegisterPodsServer(srv, fakePodsAPI{})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return srv
}

// /readyz is 503 while kubelet's Pods API does not answer, naming
// kubelet: a node whose kubelet is dead runs no Pod it can vouch for.
func TestReadyzNamesAKubeletThatDoesNotAnswer(t *testing.T) {
	var kubelet *grpc.Server
	a := startLocalAgent(t, 20*time.Millisecond, func(o *Options) { kubelet = serveFakePodsAPI(t, o.Root) })
	waitFor(t, 20*time.Second, "ready while kubelet answers", func() bool {
		code, _ := a.get(t, "/readyz")
		return code == 200
	})
	kubelet.Stop()
	var body string
	waitFor(t, 20*time.Second, "/readyz naming kubelet", func() bool {
		var code int
		code, body = a.get(t, "/readyz")
		return code == 503 && strings.Contains(body, "kubelet: kubelet is down: its Pods API at "+pods.SocketPath+" does not answer")
	})
	if !strings.Contains(body, "systemctl status kubelet") {
		t.Fatalf("/readyz says %q, without what to check", body)
	}
}
