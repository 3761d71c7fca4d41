// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podsapi "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/agent"
	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/pods"
	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/cloud"
	cloudlocal "podmin.dev/podmin/internal/cloud/local"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/secrets"
	secretslocal "podmin.dev/podmin/internal/secrets/local"
	"podmin.dev/podmin/internal/state"
	"podmin.dev/podmin/internal/syncio"
)

// fleet is a local cluster in this process: a local bucket connected as
// cluster demo with its CA secrets stored, the cluster configuration
// naming NodeGroup workers with its size, and real agents (agent.Run in
// local node mode), each with its own root and a fake kubelet.
type fleet struct {
	t      testing.TB
	dir    string
	bucket string
	env    *builtins.Env
	store  objstore.Store
	nodes  []*fleetNode
	// slotTimeout is the agents' rollout slot timeout; zero is the
	// default.
	slotTimeout time.Duration

	mu       sync.Mutex
	timeline []kubeletEvent
}

// kubeletEvent is one thing a fake kubelet saw or did, in order.
type kubeletEvent struct {
	node, revision string
	// what is "replaced" (a new revision's file replaced a running Pod),
	// "started" (a Pod started beside another of the deployment: its
	// second name, under maxSurge), "stopped" (a Pod's file went), "ready"
	// (the Pod of revision became ready) or "withdrawn-late" (the Pod's
	// endpoint was still in the stored snapshot when its Pod was replaced
	// or stopped).
	what string
	at   time.Time
}

// fleetNode is one agent and its fake kubelet.
type fleetNode struct {
	f      *fleet
	id     string
	root   string
	ip     string
	prefix netip.Prefix
	logs   syncio.Buffer
	cancel context.CancelFunc
	done   chan error
	kube   *fakeKubelet
}

// newFleet prepares the cluster; size is the configured size of workers.
func newFleet(t testing.TB, size int) *fleet {
	t.Helper()
	if _, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	dir, err := os.MkdirTemp("", "fleet")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dirs := paths.Dirs{Config: filepath.Join(dir, "config"), Cache: filepath.Join(dir, "cache"), Data: filepath.Join(dir, "data"), Runtime: filepath.Join(dir, "run")}
	f := &fleet{t: t, dir: dir, bucket: filepath.Join(dir, "bucket")}
	f.env = &builtins.Env{Dirs: dirs, Providers: map[string]cloud.Provider{"local": cloudlocal.New(dirs.Data)},
		Secrets: func(_ context.Context, _ contexts.Context, provider string) (secrets.Store, error) {
			return secretslocal.New(filepath.Join(dirs.Data, "secrets")), nil
		}}
	ctx := context.Background()
	if _, err := f.env.Connect(ctx, builtins.ConnectOptions{Cluster: "demo", Provider: "local", Bucket: f.bucket}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.env.EnsureCASecrets(ctx, builtins.CASecretsOptions{}); err != nil {
		t.Fatal(err)
	}
	f.store = localstore.Open(f.bucket)
	config := fmt.Sprintf(`{"version":1,"cluster":"demo","provider":"local","nodegroups":[{"name":"workers","size":%d}]}`+"\n", size)
	if _, err := f.store.Put(ctx, state.TFVarsPath, []byte(config)); err != nil {
		t.Fatal(err)
	}
	return f
}

// start runs agent node-<i> with its fake kubelet until the test ends.
func (f *fleet) start(i int, behave func(revision string) podBehaviour) *fleetNode {
	f.t.Helper()
	n := &fleetNode{f: f, id: fmt.Sprintf("node-%d", i), root: filepath.Join(f.dir, fmt.Sprintf("root-%d", i)),
		ip: fmt.Sprintf("2001:db8:0:1:%x::10", i+1), prefix: netip.MustParsePrefix(fmt.Sprintf("2001:db8:0:1:%x::/80", i+1)), done: make(chan error, 1)}
	n.kube = newFakeKubelet(f.t, n, behave)
	cfg := agent.Config{Provider: "local", Bucket: f.bucket, Region: "local", Cluster: "demo", NodeGroup: "workers", IPv6Prefix: n.prefix}
	started := make(chan string, 1)
	opts := agent.Options{Root: n.root, HealthAddr: "127.0.0.1:0", PollInterval: 100 * time.Millisecond, TTLMargin: 10 * time.Millisecond,
		DataDir: f.env.Dirs.Data, Settings: coordinator.Settings{APIAddr: "[::1]:0", NodeID: n.id, Dataplane: agent.DataplaneOff, SlotTimeout: f.slotTimeout,
			// A short drain: the rollouts here are about pacing, and still go
			// through the confirmation and the drain.
			Drain: 50 * time.Millisecond},
		Log:     slog.New(slog.NewTextHandler(&n.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Started: func(addr string) { started <- addr }}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { n.done <- agent.Run(ctx, cfg, opts) }()
	select {
	case <-started:
	case err := <-n.done:
		f.t.Fatalf("%s exited: %v\n%s", n.id, err, n.logs.String())
	case <-time.After(30 * time.Second):
		f.t.Fatalf("%s did not start\n%s", n.id, n.logs.String())
	}
	f.t.Cleanup(n.stop)
	f.nodes = append(f.nodes, n)
	return n
}

// stop ends the agent as SIGTERM does (it drains and leaves).
func (n *fleetNode) stop() {
	if n.cancel == nil {
		return
	}
	n.cancel()
	<-n.done
	n.cancel = nil
}

func (f *fleet) logs() string {
	var b strings.Builder
	for _, n := range f.nodes {
		fmt.Fprintf(&b, "--- %s\n%s", n.id, n.logs.String())
	}
	return b.String()
}

func (f *fleet) record(e kubeletEvent) {
	f.mu.Lock()
	f.timeline = append(f.timeline, e)
	f.mu.Unlock()
}

func (f *fleet) events() []kubeletEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.timeline)
}

// daemonSet is the built-in DaemonSet web of workers with a Service, and
// maxUnavailable when set ("surge:N" sets maxSurge N and maxUnavailable
// 0).
func daemonSet(t testing.TB, image, maxUnavailable string) string {
	t.Helper()
	data, err := manifest.Build(manifest.BuildOptions{Name: "web", NodeGroup: "workers", Images: []string{image}, Service: true})
	if err != nil {
		t.Fatal(err)
	}
	if maxUnavailable == "" {
		return string(data)
	}
	var docs []string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		if m["kind"] == "DaemonSet" {
			value := func(s string) any {
				if strings.HasSuffix(s, "%") {
					return s
				}
				return json64(s)
			}
			ru := map[string]any{"maxUnavailable": value(maxUnavailable)}
			if surge, ok := strings.CutPrefix(maxUnavailable, "surge:"); ok {
				ru = map[string]any{"maxUnavailable": 0, "maxSurge": value(surge)}
			}
			m["spec"].(map[string]any)["updateStrategy"] = map[string]any{"type": "RollingUpdate", "rollingUpdate": ru}
		}
		b, err := yaml.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	return strings.Join(docs, "---\n")
}

func json64(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// deploy commits web with image (and maxUnavailable) as podmin deploy
// does, optionally waiting.
func (f *fleet) deploy(ctx context.Context, image, maxUnavailable, wait string) (builtins.DeployResult, error) {
	file := filepath.Join(f.dir, "daemonset-"+strings.NewReplacer(":", "-", "/", "-").Replace(image)+".yaml")
	if err := os.WriteFile(file, []byte(daemonSet(f.t, image, maxUnavailable)), 0o644); err != nil {
		f.t.Fatal(err)
	}
	opts := builtins.DeployOptions{File: file, Wait: wait}
	opts.Name, opts.NodeGroup, opts.Service = "web", "workers", true
	return f.env.Deploy(ctx, opts)
}

// snapshotHas reports whether the stored Service snapshot lists addr as
// an endpoint.
func (f *fleet) snapshotHas(addr string) bool {
	obj, err := f.store.Get(context.Background(), coordinator.SnapshotKey, objstore.GetOptions{})
	if err != nil {
		return false
	}
	snap, err := coordinator.Unmarshal(obj.Data)
	if err != nil {
		return false
	}
	for _, s := range snap.Services {
		for _, e := range s.Endpoints {
			if e.Address == addr {
				return true
			}
		}
	}
	return false
}

// eventually polls cond every 10 ms until it holds.
func (f *fleet) eventually(limit time.Duration, what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("not within %s: %s\n%s", limit, what, f.logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// podBehaviour is how a fake kubelet runs a revision's Pod.
type podBehaviour struct {
	// readyAfter is how long the Pod takes to become ready.
	readyAfter time.Duration
	// never keeps the Pod not ready; crash makes its container crash loop.
	never, crash bool
}

func readyAt(d time.Duration) func(string) podBehaviour {
	return func(string) podBehaviour { return podBehaviour{readyAfter: d} }
}

// fakeKubelet stands in for one node's kubelet: it runs the static Pods
// of the node's manifests directory as its Pods API shows them, replacing
// a Pod when its file's revision changes and making the new one ready (or
// not) as behave says. It serves the real generated Pods service.
type fakeKubelet struct {
	podsapi.UnimplementedPodsServer
	n      *fleetNode
	behave func(string) podBehaviour

	mu      sync.Mutex
	running map[string]*runningPod // by Pod name
	changed chan struct{}
}

type runningPod struct {
	pod      *corev1.Pod
	revision string
	since    time.Time
	how      podBehaviour
	ready    bool
}

func newFakeKubelet(t testing.TB, n *fleetNode, behave func(string) podBehaviour) *fakeKubelet {
	t.Helper()
	k := &fakeKubelet{n: n, behave: behave, running: map[string]*runningPod{}, changed: make(chan struct{}, 1)}
	sock := filepath.Join(n.root, filepath.FromSlash(pods.SocketPath))
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("no unix socket at %s: %v", sock, err)
	}
	srv := grpc.NewServer()
	podsapi.RegisterPodsServer(srv, k)
	go func() { _ = srv.Serve(ln) }()
	ctx, cancel := context.WithCancel(context.Background())
	go k.run(ctx)
	t.Cleanup(func() { cancel(); srv.Stop() })
	return k
}

// setBehaviour changes how later revisions run.
func (k *fakeKubelet) setBehaviour(behave func(string) podBehaviour) {
	k.mu.Lock()
	k.behave = behave
	k.mu.Unlock()
}

// run follows the manifests directory every 5 ms, as kubelet follows its
// static Pod path.
func (k *fakeKubelet) run(ctx context.Context) {
	dir := filepath.Join(k.n.root, "etc", "podmin", "manifests")
	for ctx.Err() == nil {
		k.step(dir, time.Now())
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (k *fakeKubelet) step(dir string, now time.Time) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	seen := map[string]bool{}
	k.mu.Lock()
	changed := false
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		var p corev1.Pod
		if yaml.Unmarshal(b, &p) != nil || p.Name == "" {
			continue
		}
		rev := p.Annotations[nodepod.RevisionAnnotation]
		seen[p.Name] = true
		cur := k.running[p.Name]
		ip := k.n.podIP(p.Name)
		if cur == nil || cur.revision != rev {
			switch {
			case cur != nil:
				k.n.f.record(kubeletEvent{node: k.n.id, revision: rev, what: "replaced", at: now})
				if k.n.f.snapshotHas(ip) {
					k.n.f.record(kubeletEvent{node: k.n.id, revision: rev, what: "withdrawn-late", at: now})
				}
			case len(k.running) > 0:
				k.n.f.record(kubeletEvent{node: k.n.id, revision: rev, what: "started", at: now})
			}
			p.UID = types.UID(fmt.Sprintf("%s-%s-%d", k.n.id, rev, now.UnixNano()))
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: ip}}}
			cur = &runningPod{pod: &p, revision: rev, since: now, how: k.behave(rev)}
			k.running[p.Name] = cur
			changed = true
		}
		ready := !cur.how.never && !cur.how.crash && now.Sub(cur.since) >= cur.how.readyAfter
		if ready != cur.ready || cur.pod.Status.Conditions == nil {
			cur.ready = ready
			cond := corev1.ConditionFalse
			if ready {
				cond = corev1.ConditionTrue
				k.n.f.record(kubeletEvent{node: k.n.id, revision: rev, what: "ready", at: now})
			}
			np := cur.pod.DeepCopy()
			np.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond, LastTransitionTime: metav1.NewTime(now)}}
			if cur.how.crash {
				np.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", RestartCount: 3,
					State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}},
					LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
			}
			cur.pod = np
			changed = true
		}
	}
	for name, r := range k.running {
		if !seen[name] {
			k.n.f.record(kubeletEvent{node: k.n.id, revision: r.revision, what: "stopped", at: now})
			if r.ready && k.n.f.snapshotHas(k.n.podIP(name)) {
				k.n.f.record(kubeletEvent{node: k.n.id, revision: r.revision, what: "withdrawn-late", at: now})
			}
			delete(k.running, name)
			changed = true
		}
	}
	k.mu.Unlock()
	if changed {
		select {
		case k.changed <- struct{}{}:
		default:
		}
	}
}

// podIP is the address of the node's Pod name: the deployment's second
// static Pod (maxSurge) has an address of its own.
func (n *fleetNode) podIP(name string) string {
	if strings.HasSuffix(name, ".surge") {
		return strings.TrimSuffix(n.ip, "::10") + "::11"
	}
	return n.ip
}

// ready counts the Pods the fake kubelet runs ready now, and all it runs.
func (k *fakeKubelet) ready() (ready, all int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, r := range k.running {
		if r.ready {
			ready++
		}
	}
	return ready, len(k.running)
}

func (k *fakeKubelet) list() map[string][]byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string][]byte{}
	for name, r := range k.running {
		if b, err := r.pod.Marshal(); err == nil {
			out[name] = b
		}
	}
	return out
}

func (k *fakeKubelet) ListPods(context.Context, *podsapi.ListPodsRequest) (*podsapi.ListPodsResponse, error) {
	return &podsapi.ListPodsResponse{Pods: slices.Collect(maps.Values(k.list()))}, nil
}

func (k *fakeKubelet) WatchPods(_ *podsapi.WatchPodsRequest, s grpc.ServerStreamingServer[podsapi.WatchPodsEvent]) error {
	return streamPods(s, k.list, k.changed, time.Second)
}

// streamPods serves a Pods API watch as kubelet does: the Pods of list as
// ADDED, INITIAL_SYNC_COMPLETE, then MODIFIED, ADDED and DELETED events
// as list changes, looked at again on changed or every interval.
func streamPods(s grpc.ServerStreamingServer[podsapi.WatchPodsEvent], list func() map[string][]byte, changed <-chan struct{}, every time.Duration) error {
	sent := map[string][]byte{}
	for synced := false; ; synced = true {
		cur := list()
		for name, b := range cur {
			typ := podsapi.EventType_ADDED
			if old, ok := sent[name]; ok {
				if string(old) == string(b) {
					continue
				}
				typ = podsapi.EventType_MODIFIED
			}
			if err := s.Send(&podsapi.WatchPodsEvent{Type: typ, Pod: b}); err != nil {
				return err
			}
			sent[name] = b
		}
		for name, b := range sent {
			if _, ok := cur[name]; !ok {
				if err := s.Send(&podsapi.WatchPodsEvent{Type: podsapi.EventType_DELETED, Pod: b}); err != nil {
					return err
				}
				delete(sent, name)
			}
		}
		if !synced {
			// The first round is the initial list.
			if err := s.Send(&podsapi.WatchPodsEvent{Type: podsapi.EventType_INITIAL_SYNC_COMPLETE}); err != nil {
				return err
			}
		}
		select {
		case <-s.Context().Done():
			return nil
		case <-changed:
		case <-time.After(every):
		}
	}
}

// statusOf reads one deployment's status through the CLI's built-in.
func (f *fleet) statusOf(name string) builtins.DeploymentStatus {
	f.t.Helper()
	res, err := f.env.Status(context.Background(), builtins.StatusOptions{NodeGroup: "workers", Name: name})
	if err != nil {
		f.t.Fatal(err)
	}
	return res.NodeGroups[0].Deployments[0]
}
