// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	podsapi "k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/pods"
	"podmin.dev/podmin/cmd/podmin-agent/internal/e2enode"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
)

// staticName is kubelet's name of a static Pod on this node.
func staticName(pod string) string { return pod + "-" + nodeName }

// readyPod returns the ready Pod of a DaemonSet and its address.
func readyPod(name string) (*corev1.Pod, netip.Addr, bool) {
	ps, err := e2enode.ListPods(podsAPISock)
	if err != nil {
		return nil, netip.Addr{}, false
	}
	for _, p := range ps {
		if p.Name == staticName(name) && p.DeletionTimestamp == nil && pods.IsReady(p) && p.Status.PodIP != "" {
			a, err := netip.ParseAddr(p.Status.PodIP)
			return p, a, err == nil
		}
	}
	return nil, netip.Addr{}, false
}

// endpoints reads the leader's Service snapshot from the bucket: the ready
// addresses of namespace/name.
func (n *node) endpoints(namespace, name string) []string {
	obj, err := local.Open(n.bucket).Get(context.Background(), coordinator.SnapshotKey, objstore.GetOptions{})
	if err != nil {
		return nil
	}
	s, err := coordinator.Unmarshal(obj.Data)
	if err != nil {
		return nil
	}
	var out []string
	for _, svc := range s.GetServices() {
		if svc.Namespace == namespace && svc.Name == name {
			for _, e := range svc.Endpoints {
				out = append(out, e.Address)
			}
		}
	}
	slices.Sort(out)
	return out
}

// hello is what the workload answers on /.
type hello = e2enode.Hello

var client = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// get GETs a URL and returns the body of a 200 answer.
func get(u string) ([]byte, error) {
	resp, err := client.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

func podURL(ip netip.Addr, path string) string {
	return "http://" + net.JoinHostPort(ip.String(), "8080") + path
}

// helloAt reads a Pod's answer on its Pod IP.
func helloAt(ip netip.Addr) (hello, error) {
	var h hello
	b, err := get(podURL(ip, "/"))
	if err != nil {
		return h, err
	}
	return h, json.Unmarshal(b, &h)
}

// fetchFrom makes the Pod at ip GET target from inside itself, within
// timeout (0: the workload's default).
func fetchFrom(ip netip.Addr, target string, timeout time.Duration) (hello, error) {
	return fetchFromAs(ip, target, "", timeout)
}

// fetchFromAs is fetchFrom verifying the server as servername (for a
// target that names an address); "" verifies the target's host.
func fetchFromAs(ip netip.Addr, target, servername string, timeout time.Duration) (hello, error) {
	var h hello
	q := url.Values{"url": {target}}
	if timeout > 0 {
		q.Set("timeout", timeout.String())
	}
	if servername != "" {
		q.Set("servername", servername)
	}
	b, err := get(podURL(ip, "/fetch?"+q.Encode()))
	if err != nil {
		return h, err
	}
	var r struct {
		Status int
		Body   string
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return h, err
	}
	if r.Status != http.StatusOK {
		return h, fmt.Errorf("%s answered %d: %s", target, r.Status, r.Body)
	}
	return h, json.Unmarshal([]byte(r.Body), &h)
}

// watch is the test's record of when it first saw a Pod ready through the
// Pods API and its address in the agent's Service snapshot.
type watch struct {
	mu         sync.Mutex
	readyAt    map[string]time.Time // by Pod IP
	endpointAt map[string]time.Time
}

// observe follows kubelet's Pods API with a watch of its own, as the agent
// does, and polls the snapshot of default/<service> every 20 ms, until ctx
// ends.
func (n *node) observe(ctx context.Context, service string) *watch {
	w := &watch{readyAt: map[string]time.Time{}, endpointAt: map[string]time.Time{}}
	go func() {
		conn, err := grpc.NewClient("unix://"+podsAPISock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return
		}
		defer conn.Close()
		stream, err := podsapi.NewPodsClient(conn).WatchPods(ctx, &podsapi.WatchPodsRequest{})
		if err != nil {
			return
		}
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			var p corev1.Pod
			if ev.GetType() == podsapi.EventType_INITIAL_SYNC_COMPLETE || p.Unmarshal(ev.GetPod()) != nil {
				continue
			}
			if p.Name == staticName(service) && pods.IsReady(&p) && p.Status.PodIP != "" {
				w.mu.Lock()
				if _, ok := w.readyAt[p.Status.PodIP]; !ok {
					w.readyAt[p.Status.PodIP] = time.Now()
				}
				w.mu.Unlock()
			}
		}
	}()
	go func() {
		for ctx.Err() == nil {
			eps := n.endpoints("default", service)
			now := time.Now()
			w.mu.Lock()
			for _, e := range eps {
				if _, ok := w.endpointAt[e]; !ok {
					w.endpointAt[e] = now
				}
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *watch) times(ip string) (ready, endpoint time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.readyAt[ip], w.endpointAt[ip]
}

// hostKernel is the machine's kernel line.
func hostKernel() string {
	b, _ := os.ReadFile("/proc/version")
	return strings.TrimSpace(string(b))
}

// fileUnder lists the regular files beneath dir.
func filesUnder(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	return out
}
