// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/agent/identity"
	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/state"
)

// The fleet simulator: N in-process agents, each its own coordinator
// (election, coordination API over mTLS on loopback, leader or follower)
// and static-Pod reconciler with its reconcile loop, wired as the agent
// wires them, all on one bucket. Each node sees the bucket through its own
// counting wrapper, so requests and bytes are known per node. Kubelet,
// DNS, the dataplane and the workload identities are left out: they do
// not read the deployment index.

// nodeCounts are one node's bucket requests and the bytes they returned.
type nodeCounts struct {
	requests   int64
	indexBody  int64 // deployments/index.json bodies
	viewBody   int64 // NodeGroup view bodies
	otherBody  int64 // payloads and everything else
	indexMeta  int64 // user metadata returned with the index (HEAD and GET)
	indexHeads int64
	indexGets  int64 // with a body
}

func (c nodeCounts) sub(o nodeCounts) nodeCounts {
	return nodeCounts{c.requests - o.requests, c.indexBody - o.indexBody, c.viewBody - o.viewBody, c.otherBody - o.otherBody,
		c.indexMeta - o.indexMeta, c.indexHeads - o.indexHeads, c.indexGets - o.indexGets}
}

func (c nodeCounts) add(o nodeCounts) nodeCounts {
	return nodeCounts{c.requests + o.requests, c.indexBody + o.indexBody, c.viewBody + o.viewBody, c.otherBody + o.otherBody,
		c.indexMeta + o.indexMeta, c.indexHeads + o.indexHeads, c.indexGets + o.indexGets}
}

// countingBucket is one node's view of the shared bucket.
type countingBucket struct {
	objstore.Store
	mu sync.Mutex
	c  nodeCounts
}

func metaBytes(m map[string]string) int64 {
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	return int64(n)
}

func (b *countingBucket) body(key string, n int64, meta map[string]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case key == state.IndexPath:
		b.c.indexBody += n
		b.c.indexMeta += metaBytes(meta)
		if n > 0 {
			b.c.indexGets++
		}
	case strings.HasPrefix(key, state.ViewsPrefix):
		b.c.viewBody += n
	default:
		b.c.otherBody += n
	}
}

func (b *countingBucket) request() {
	b.mu.Lock()
	b.c.requests++
	b.mu.Unlock()
}

func (b *countingBucket) counts() nodeCounts {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.c
}

func (b *countingBucket) Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	b.request()
	obj, err := b.Store.Get(ctx, key, opts)
	b.body(key, int64(len(obj.Data)), obj.Metadata)
	return obj, err
}

func (b *countingBucket) Head(ctx context.Context, key string) (objstore.Info, error) {
	b.request()
	info, err := b.Store.Head(ctx, key)
	if key == state.IndexPath {
		b.mu.Lock()
		b.c.indexHeads++
		b.c.indexMeta += metaBytes(info.Metadata)
		b.mu.Unlock()
	}
	return info, err
}

func (b *countingBucket) PutIfAbsent(ctx context.Context, key string, data []byte) (string, error) {
	b.request()
	return b.Store.PutIfAbsent(ctx, key, data)
}

func (b *countingBucket) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	b.request()
	return b.Store.PutIfMatch(ctx, key, data, etag)
}

func (b *countingBucket) Put(ctx context.Context, key string, data []byte) (string, error) {
	b.request()
	return b.Store.Put(ctx, key, data)
}

func (b *countingBucket) Delete(ctx context.Context, key string, ifMatch string) error {
	b.request()
	return b.Store.Delete(ctx, key, ifMatch)
}

func (b *countingBucket) List(ctx context.Context, prefix string, opts objstore.ListOptions) (objstore.ListPage, error) {
	b.request()
	return b.Store.List(ctx, prefix, opts)
}

// countedBody counts a streamed body as it is read.
type countedBody struct {
	io.ReadCloser
	n func(int)
}

func (c *countedBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n(n)
	return n, err
}

func (b *countingBucket) Open(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	b.request()
	r, err := objstore.OpenObject(ctx, b.Store, key, opts)
	if err != nil {
		return nil, err
	}
	r.ReadCloser = &countedBody{ReadCloser: r.ReadCloser, n: func(n int) { b.body(key, int64(n), nil) }}
	return r, nil
}

func (b *countingBucket) Write(ctx context.Context, key string, body io.Reader, size int64, opts objstore.PutOptions) (string, error) {
	b.request()
	return objstore.WriteObject(ctx, b.Store, key, body, size, opts)
}

// fleetOptions shape a fleet.
type fleetOptions struct {
	nodes, nodegroups int
	// timing is the election's; zero means the production timing.
	timing    election.Timing
	retention time.Duration
	// poll and hintedPoll are the reconcile loop's; indexPoll the
	// leader's. Zero means the production values.
	poll, hintedPoll, indexPoll time.Duration
	// root holds the nodes' sandbox roots.
	root string
}

// fleetNode is one simulated agent. Its reconciler and its coordinator
// each see the bucket through their own counter: what a node pays to learn
// its desired state is the reconciler's, the leader's work and the
// election the coordinator's.
type fleetNode struct {
	id, ng string
	bucket *countingBucket // the reconciler's
	coordB *countingBucket
	coord  *coordinator.Coordinator
	rec    *staticpod.Reconciler
	loop   *staticpod.Loop
	root   string
	logs   *logBuffer

	mu        sync.Mutex
	published map[string]time.Time // index ETag → when this node first published it
	hinted    map[string]time.Time // index ETag → when a hint of it first reached this node
}

// hintedAt is when a hint of etag first reached n.
func (n *fleetNode) hintedAt(etag string) (time.Time, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for e, at := range n.hinted {
		if objstore.SameETag(e, etag) {
			return at, true
		}
	}
	return time.Time{}, false
}

func (n *fleetNode) publishedAt(etag string) (time.Time, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	at, ok := n.published[etag]
	return at, ok
}

type fleet struct {
	opts   fleetOptions
	store  objstore.Store
	nodes  []*fleetNode
	ngs    []string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// fleetNodeGroups names n NodeGroups.
func fleetNodeGroups(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("ng%03d", i)
	}
	return out
}

// nodeGroupOf spreads nodes over NodeGroups unevenly, as real fleets are:
// NodeGroup k gets a share proportional to 1/(1 + k mod 4), so a quarter
// of them are about four times the size of another quarter; every
// NodeGroup gets at least one node while there are enough nodes.
func nodeGroupOf(i, nodes int, ngs []string) string {
	if i < len(ngs) {
		return ngs[i]
	}
	weights := make([]float64, len(ngs))
	total := 0.0
	for k := range ngs {
		weights[k] = 1 / float64(1+k%4)
		total += weights[k]
	}
	// Deterministic: place node i at its quantile of the weights.
	q := float64(i-len(ngs)) / float64(max(1, nodes-len(ngs))) * total
	for k, w := range weights {
		if q < w {
			return ngs[k]
		}
		q -= w
	}
	return ngs[len(ngs)-1]
}

// seedIndex commits entries deployments spread evenly over the
// NodeGroups, with their payloads, and returns their keys. The bulk of it
// is written as one index object (as an index grown over time would be);
// one commit per NodeGroup then gives it write metadata and views.
func seedIndex(t testing.TB, store objstore.Store, ngs []string, entries int) []state.Key {
	t.Helper()
	ctx := context.Background()
	ix := state.NewIndex()
	var keys []state.Key
	type payload struct {
		path string
		data []byte
	}
	payloads := make(chan payload, 64)
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 16 {
		wg.Go(func() {
			for p := range payloads {
				if _, err := store.PutIfAbsent(ctx, p.path, p.data); err != nil && failed.Load() == nil {
					failed.Store(err)
				}
			}
		})
	}
	for i := range entries {
		ng := ngs[i%len(ngs)]
		name := fmt.Sprintf("app-%05d", i)
		d := fleetDeployment(t, ng, name, "app:v0", i%2 == 0)
		e := state.Entry{}
		var err error
		if e.Pod, err = state.PodPayloadPath(ng, d.Pod); err != nil {
			t.Fatal(err)
		}
		payloads <- payload{e.Pod, d.Pod}
		if d.ServiceName != "" {
			if e.Service, err = state.ServicePayloadPath(d.Namespace, d.ServiceName, d.Service); err != nil {
				t.Fatal(err)
			}
			payloads <- payload{e.Service, d.Service}
		}
		if _, _, err := ix.Set(d.Key, e); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, d.Key)
	}
	close(payloads)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, state.IndexPath, ix.Encode()); err != nil {
		t.Fatal(err)
	}
	// One commit per NodeGroup, as deploys leave an index: write IDs,
	// the NodeGroups' recent changes and views.
	c := state.NewCommitter(store, state.CommitOptions{})
	for _, ng := range ngs[:min(len(ngs), entries)] {
		k := state.Key{NodeGroup: ng, Name: fmt.Sprintf("app-%05d", slices.Index(ngs, ng))}
		if _, err := c.Deploy(ctx, fleetDeployment(t, ng, k.Name, "app:v1", false)); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// fleetDeployment is a built-in deployment of ng in namespace ng, so
// Service identities (named after the deployment) never collide.
func fleetDeployment(t testing.TB, ng, name, image string, service bool) state.Deployment {
	t.Helper()
	data, err := manifest.Build(manifest.BuildOptions{Name: name, NodeGroup: ng, Namespace: ng, Images: []string{image}, Service: service})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := manifest.Extract(data, manifest.ExtractOptions{Name: name, NodeGroup: ng})
	if err != nil {
		t.Fatal(err)
	}
	d := state.Deployment{Key: state.Key{NodeGroup: ng, Name: name}, Namespace: ex.Namespace, Pod: ex.PodYAML}
	if ex.Service != nil {
		d.ServiceName, d.Service = ex.Service.Name, ex.ServiceYAML
	}
	return d
}

// imageOf is the first container image of a Pod payload or file.
func imageOf(pod []byte) string {
	for _, line := range strings.Split(string(pod), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "- ")
		if v, ok := strings.CutPrefix(line, "image: "); ok {
			return v
		}
	}
	return ""
}

// startFleet starts the nodes and waits until one leads, every node's
// hints arrive and every node published the current index version.
func startFleet(t testing.TB, store objstore.Store, opts fleetOptions) *fleet {
	t.Helper()
	f := &fleet{opts: opts, store: store, ngs: fleetNodeGroups(opts.nodegroups)}
	v, err := pki.GenerateClusterCA(rand.Reader, "fleet", time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.ParseClusterCA(v, "fleet")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	t.Cleanup(f.stop)
	for i := range opts.nodes {
		f.nodes = append(f.nodes, f.startNode(t, ctx, ca, i))
	}
	f.waitConverged(t, 10*time.Minute)
	return f
}

func (f *fleet) startNode(t testing.TB, ctx context.Context, ca pki.ClusterCA, i int) *fleetNode {
	t.Helper()
	n := &fleetNode{id: fmt.Sprintf("node-%04d", i), ng: nodeGroupOf(i, f.opts.nodes, f.ngs), logs: &logBuffer{},
		bucket: &countingBucket{Store: f.store}, coordB: &countingBucket{Store: f.store}, published: map[string]time.Time{}, hinted: map[string]time.Time{},
		root: filepath.Join(f.opts.root, fmt.Sprintf("node-%04d", i))}
	lis, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	port := uint16(lis.Addr().(*net.TCPAddr).Port)
	addr := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 12: byte(i >> 24), 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)})
	id, err := identity.New(identity.Options{CA: ca, Cluster: "fleet", NodeGroup: n.ng, NodeID: n.id, Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	n.rec, err = staticpod.New(staticpod.Options{Store: n.bucket, Cluster: "fleet", NodeGroup: n.ng, Root: n.root,
		Secrets: map[string]mounts.Reader{}, Publisher: &staticpod.Recorder{}, Log: log,
		Hooks: staticpod.Hooks{Published: func(etag string, _ int) {
			n.mu.Lock()
			if _, ok := n.published[etag]; !ok {
				n.published[etag] = time.Now()
			}
			n.mu.Unlock()
		}}})
	if err != nil {
		t.Fatal(err)
	}
	var loop *staticpod.Loop
	n.coord, err = coordinator.New(coordinator.Options{
		NodeID: n.id, NodeGroup: n.ng, Advertise: netip.AddrPortFrom(addr, port), Listener: lis, Dial: api.LoopbackDial,
		PodPrefix: netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 4: byte(i >> 8), 5: byte(i), 6: 1}), 80),
		Store:     n.coordB, Identity: id, Log: log,
		Index: coordinator.NewIndexCache(n.coordB), Views: state.NewViewKeeper(n.coordB), IndexPoll: f.opts.indexPoll,
		OnIndexHint: func(etag string) {
			n.mu.Lock()
			if _, ok := n.hinted[etag]; !ok && etag != "" {
				n.hinted[etag] = time.Now()
			}
			n.mu.Unlock()
			loop.Hint(etag)
		},
		OnView: func(*pb.ServiceSnapshot) {},
		Timing: f.opts.timing, Retention: f.opts.retention,
	})
	if err != nil {
		t.Fatal(err)
	}
	loop = staticpod.NewLoop(n.rec, staticpod.LoopOptions{Interval: f.opts.poll, HintedInterval: f.opts.hintedPoll,
		Hinted: n.coord.Hinted, Vouched: n.coord.SafetyPoll})
	n.loop = loop
	// Every goroutine of the node carries its ID, so a CPU profile
	// tells the leader's work from the followers'.
	pprof.Do(ctx, pprof.Labels("node", n.id), func(ctx context.Context) {
		f.wg.Go(func() { _ = n.coord.Run(ctx) })
		f.wg.Go(func() { _ = loop.Run(ctx) })
	})
	return n
}

func (f *fleet) stop() {
	f.cancel()
	f.wg.Wait()
}

// leader returns the node that leads, if exactly one does.
func (f *fleet) leader() *fleetNode {
	var l *fleetNode
	for _, n := range f.nodes {
		if n.coord.Elector().IsLeader() {
			if l != nil {
				return nil
			}
			l = n
		}
	}
	return l
}

// currentETag is the index's ETag now.
func (f *fleet) currentETag(t testing.TB) string {
	t.Helper()
	info, err := f.store.Head(context.Background(), state.IndexPath)
	if err != nil {
		t.Fatal(err)
	}
	return info.ETag
}

// waitConverged waits until one node leads, every node is hinted and
// every node applied the current index version.
func (f *fleet) waitConverged(t testing.TB, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		etag := f.currentETag(t)
		pending := 0
		for _, n := range f.nodes {
			if applied, ok := n.rec.Applied(); !ok || !objstore.SameETag(applied, etag) || !n.coord.Hinted() {
				pending++
			}
		}
		if pending == 0 && f.leader() != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fleet not converged within %s: %d of %d nodes pending, leader %v", limit, pending, len(f.nodes), f.leader() != nil)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// counts sums the nodes' counters.
func (f *fleet) counts() []nodeCounts {
	out := make([]nodeCounts, len(f.nodes))
	for i, n := range f.nodes {
		out[i] = n.bucket.counts()
	}
	return out
}

// fleetCommit is one commit and what the fleet did for it.
type fleetCommit struct {
	ng   string
	etag string
	// latency is commit → published on each node of the NodeGroup;
	// found commit → the leader's hint (its own poll found the version),
	// hinted commit → the hint reaching each node of the NodeGroup.
	latency, hinted []time.Duration
	found           time.Duration
	// related and unrelated sum the nodes' requests and bytes, with the
	// number of nodes of each kind.
	related, unrelated   nodeCounts
	nRelated, nUnrelated int
	viewBytes            int
}

// commit deploys a new image of one deployment of ng, as podmin deploy
// does, and waits until every node applied the new version and every
// node of ng published it.
func (f *fleet) commit(t testing.TB, ng string, key state.Key, image string, limit time.Duration, via objstore.Store) fleetCommit {
	t.Helper()
	before := f.counts()
	d := fleetDeployment(t, key.NodeGroup, key.Name, image, false)
	if via == nil {
		via = f.store
	}
	res, err := state.NewCommitter(via, state.CommitOptions{}).Deploy(context.Background(), d)
	if err != nil || res.Outcome != state.Updated {
		t.Fatalf("commit of %s: %+v, %v", key, res, err)
	}
	committed := time.Now()
	c := fleetCommit{ng: ng, etag: f.currentETag(t)}
	deadline := committed.Add(limit)
	for _, n := range f.nodes {
		for {
			applied, _ := n.rec.Applied()
			_, published := n.publishedAt(c.etag)
			if objstore.SameETag(applied, c.etag) && (n.ng != ng || published) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("commit to %s not applied by %s (%s) within %s; its log:\n%s", ng, n.id, n.ng, limit, n.logs.String())
			}
			time.Sleep(2 * time.Millisecond)
		}
		if n.ng == ng {
			at, _ := n.publishedAt(c.etag)
			c.latency = append(c.latency, at.Sub(committed))
			if h, ok := n.hintedAt(c.etag); ok {
				c.hinted = append(c.hinted, max(0, h.Sub(committed)))
			}
		}
		if n.coord.Elector().IsLeader() {
			if h, ok := n.hintedAt(c.etag); ok {
				c.found = max(0, h.Sub(committed))
			}
		}
	}
	after := f.counts()
	for i, n := range f.nodes {
		d := after[i].sub(before[i])
		if n.ng == ng {
			c.related, c.nRelated = c.related.add(d), c.nRelated+1
		} else {
			c.unrelated, c.nUnrelated = c.unrelated.add(d), c.nUnrelated+1
		}
	}
	if p, err := state.ViewPath(ng); err == nil {
		if obj, err := f.store.Get(context.Background(), p, objstore.GetOptions{}); err == nil {
			c.viewBytes = len(obj.Data)
		}
	}
	return c
}

// TestFleetOfNodesReadsOnlyWhatConcernsThem is a small fleet on a local
// bucket: nine agents in three NodeGroups, a fast leader poll. Every
// commit reaches the nodes of its NodeGroup through the leader's hint,
// each of them reads the NodeGroup's view and no node reads the index;
// every other node reads no bytes at all. A commit whose view write is
// lost is repaired by the leader while the nodes wait for it, and no node
// publishes anything but the index's content.
func TestFleetOfNodesReadsOnlyWhatConcernsThem(t *testing.T) {
	store := localstore.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := store.CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	ngs := fleetNodeGroups(3)
	keys := seedIndex(t, store, ngs, 12)
	f := startFleet(t, store, fleetOptions{nodes: 9, nodegroups: 3, root: t.TempDir(),
		timing:    election.Timing{Renew: 100 * time.Millisecond, Timeout: 500 * time.Millisecond, Hold: 350 * time.Millisecond, Retry: 50 * time.Millisecond},
		retention: time.Second, poll: time.Hour, hintedPoll: time.Hour, indexPoll: 20 * time.Millisecond})
	// Every third committer stops between the index and the view write.
	lossy := faultstore.New(store, faultstore.WithRules(faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpPut}, Prefix: state.ViewsPrefix}))
	for i := range 9 {
		key := keys[i%len(keys)]
		var via objstore.Store
		if i%3 == 2 {
			via = lossy
		}
		c := f.commit(t, key.NodeGroup, key, fmt.Sprintf("app:c%d", i+1), 30*time.Second, via)
		if c.nRelated == 0 || c.nRelated+c.nUnrelated != 9 {
			t.Fatalf("commit %d: %d related, %d unrelated nodes", i, c.nRelated, c.nUnrelated)
		}
		if c.unrelated.indexBody != 0 || c.unrelated.viewBody != 0 || c.unrelated.otherBody != 0 {
			t.Fatalf("commit %d: nodes of other NodeGroups read %+v", i, c.unrelated)
		}
		// A node may find the view a moment before the committer wrote
		// it and read it again; it never reads the index.
		if c.related.indexBody != 0 || c.related.viewBody < int64(c.nRelated*c.viewBytes) {
			t.Fatalf("commit %d: the NodeGroup's %d nodes read %+v, want a %d byte view each and no index", i, c.nRelated, c.related, c.viewBytes)
		}
	}
	// Every node publishes exactly its NodeGroup's entries of the index.
	ix, _, err := state.ReadIndex(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range f.nodes {
		items := ix.NodeGroup(n.ng)
		files, err := os.ReadDir(filepath.Join(n.root, "etc", "podmin", "manifests"))
		if err != nil || len(files) != len(items) {
			t.Fatalf("%s (%s): %d files, %v; the index has %d entries", n.id, n.ng, len(files), err, len(items))
		}
		for _, it := range items {
			pod, err := state.FetchPayload(context.Background(), store, it.Entry.Pod)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(n.root, "etc", "podmin", "manifests", it.Key.Name+".yaml"))
			if err != nil || !strings.Contains(string(got), imageOf(pod)) {
				t.Fatalf("%s: %s is not the index's (%s): %v", n.id, it.Key.Name, imageOf(pod), err)
			}
		}
	}
}
