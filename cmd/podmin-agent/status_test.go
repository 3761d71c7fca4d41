// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// countingStore counts GETs by key.
type countingStore struct {
	objstore.Store
	mu   sync.Mutex
	gets map[string]int
}

func (c *countingStore) Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	c.mu.Lock()
	c.gets[key]++
	c.mu.Unlock()
	return c.Store.Get(ctx, key, opts)
}

func (c *countingStore) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.gets {
		n += v
	}
	return n
}

func waitFor3(t *testing.T, f *fleet, until string, timeout time.Duration) (builtins.WaitResult, error) {
	t.Helper()
	return f.env.Wait(context.Background(), builtins.WaitOptions{Name: "web", NodeGroup: "workers", Until: until, Timeout: timeout, Poll: 20 * time.Millisecond})
}

// Three local agents with fake kubelets go through every state the CLI
// reports: unknown before any agent runs, ready, applied but not ready,
// an error for the revision, a revision superseded while a deploy waits
// for it, and a missing node. Status costs one GET per NodeGroup (plus
// the index and the lease) whatever the node count, and the leader writes
// nothing while nothing changes.
func TestObservedStateOfThreeNodes(t *testing.T) {
	f := newFleet(t, 3)
	ctx := context.Background()
	if _, err := f.deploy(ctx, "hello:v1", "", ""); err != nil {
		t.Fatal(err)
	}
	if d := f.statusOf("web"); d.State != builtins.StateUnknown || !strings.Contains(d.Summary, "no agent takes part in coordination") {
		t.Fatalf("before any agent: %+v", d)
	}

	// Ready: every node runs v1 and kubelet reports it ready. (Until the
	// leader created the workload CA, nodes report an identity error for
	// v1: status shows it, so this polls status instead of failing a wait.)
	for i := range 3 {
		f.start(i, readyAt(50*time.Millisecond))
	}
	f.eventually(time.Minute, "web ready on 3 nodes", func() bool { return f.statusOf("web").State == builtins.StateReady })
	w, err := waitFor3(t, f, builtins.UntilReady, time.Minute)
	if err != nil || w.State != builtins.StateReady || w.Ready != 3 || w.Applied != 3 || w.Total != 3 || len(w.Nodes) != 3 {
		t.Fatalf("wait ready: %+v, %v\n%s", w, err, f.logs())
	}
	for _, n := range w.Nodes {
		if n.Readiness != state.Ready || n.AppliedAt == nil || n.ReportedAt == nil {
			t.Fatalf("node report %+v", n)
		}
	}

	// Status costs 1 GET per NodeGroup plus the index and the lease.
	counter := &countingStore{gets: map[string]int{}}
	f.env.WrapStore = func(s objstore.Store) objstore.Store { counter.Store = s; return counter }
	res, err := f.env.Status(ctx, builtins.StatusOptions{NodeGroup: "workers"})
	f.env.WrapStore = nil
	if err != nil || len(res.NodeGroups) != 1 || res.NodeGroups[0].Live != 3 || !res.Leader.Live {
		t.Fatalf("status: %+v, %v", res, err)
	}
	key, _ := state.NodeGroupStatusPath("workers")
	if counter.total() != 3 || counter.gets[key] != 1 || counter.gets[state.IndexPath] != 1 || counter.gets[state.DNSLeaderPath] != 1 {
		t.Fatalf("status made %v GETs, want 1 each of the index, the lease and the status object", counter.gets)
	}

	// Nothing changes: once every node's endpoint is in the snapshot, no
	// node writes anything to the bucket but the leader's lease renewal
	// over more than one renew interval of the leader's periodic pass (the
	// nodes keep reporting every interval). Every object is compared by
	// ETag and modification time, so a rewrite of equal bytes counts too.
	f.eventually(30*time.Second, "every endpoint in the snapshot", func() bool {
		return f.snapshotHas(f.nodes[0].ip) && f.snapshotHas(f.nodes[1].ip) && f.snapshotHas(f.nodes[2].ip)
	})
	before := f.objects()
	// An observation window, not a wait for a condition: absence of
	// writes can only be seen over time.
	time.Sleep(6 * time.Second)
	after := f.objects()
	var written []string
	for k, v := range after {
		if b, ok := before[k]; (!ok || b != v) && k != state.DNSLeaderPath {
			written = append(written, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			written = append(written, k+" (deleted)")
		}
	}
	if len(written) > 0 {
		t.Fatalf("writes while nothing changed: %v\n%s", written, f.logs())
	}
	t.Logf("idle for 6 s: %d objects in the bucket, none written but the lease (%t)", len(after), before[state.DNSLeaderPath] != after[state.DNSLeaderPath])

	// Applied but not ready: node-2's v2 Pod never becomes ready. With
	// maxUnavailable 100% every node applies at once.
	f.nodes[2].kube.setBehaviour(func(string) podBehaviour { return podBehaviour{never: true} })
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	r, err := f.deploy(dctx, "hello:v2", "100%", builtins.UntilApplied)
	cancel()
	if err != nil || r.Wait == nil || r.Wait.Applied != 3 || r.Wait.Revision != r.Revision {
		t.Fatalf("deploy --wait=applied: %+v, %v\n%s", r.Wait, err, f.logs())
	}
	w, err = waitFor3(t, f, builtins.UntilReady, 2*time.Second)
	var te *builtins.WaitTimeoutError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, builtins.ErrTimeout) ||
		!strings.Contains(err.Error(), "node-2") || !strings.Contains(err.Error(), "3/3 applied, 2/3 ready") {
		t.Fatalf("wait for a Pod that is never ready: %v", err)
	}
	if w.State != builtins.StateProgressing || w.Ready != 2 {
		t.Fatalf("not ready: %+v", w)
	}

	// An error: node-1's v3 container crash-loops, and the wait fails with
	// the node's error.
	f.nodes[2].kube.setBehaviour(readyAt(50 * time.Millisecond))
	f.nodes[1].kube.setBehaviour(func(string) podBehaviour { return podBehaviour{crash: true} })
	dctx, cancel = context.WithTimeout(ctx, time.Minute)
	r, err = f.deploy(dctx, "hello:v3", "100%", builtins.UntilReady)
	cancel()
	if !errors.Is(err, builtins.ErrNodeError) || !strings.Contains(err.Error(), "node-1 (kubelet): container web: CrashLoopBackOff") ||
		!strings.Contains(err.Error(), "committed") {
		t.Fatalf("deploy --wait of a crashing revision: %v\n%s", err, f.logs())
	}
	if r.Wait == nil || r.Wait.State != builtins.StateFailed || len(r.Wait.Errors) != 1 || r.Wait.Errors[0].Node != "node-1" {
		t.Fatalf("failed wait: %+v", r.Wait)
	}

	// Superseded: a deploy waits for v4 (slow to become ready) while
	// another commit replaces it.
	for _, n := range f.nodes {
		n.kube.setBehaviour(readyAt(3 * time.Second))
	}
	waited := make(chan error, 1)
	go func() {
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_, err := f.deploy(dctx, "hello:v4", "100%", builtins.UntilReady)
		waited <- err
	}()
	f.eventually(30*time.Second, "a node runs v4", func() bool {
		return slices.ContainsFunc(f.events(), func(e kubeletEvent) bool { return e.what == "replaced" && e.revision == revisionOf(t, f, "hello:v4") })
	})
	if _, err := f.deploy(ctx, "hello:v5", "100%", ""); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; !errors.Is(err, builtins.ErrSuperseded) {
		t.Fatalf("deploy --wait of a superseded revision: %v", err)
	}
	if w, err := waitFor3(t, f, builtins.UntilReady, time.Minute); err != nil || w.Ready != 3 {
		t.Fatalf("v5: %+v, %v", w, err)
	}

	// A missing node: node-2 stops (it drains and leaves); the configured
	// size says 3, so the status shows it missing and a wait cannot end.
	f.nodes[2].stop()
	f.eventually(30*time.Second, "node-2 missing", func() bool {
		res, err := f.env.Status(ctx, builtins.StatusOptions{NodeGroup: "workers"})
		if err != nil || len(res.NodeGroups) != 1 {
			return false
		}
		g := res.NodeGroups[0]
		return g.Missing == 1 && g.Live == 2 && slices.ContainsFunc(g.Nodes, func(n builtins.NodeSummary) bool { return n.Node == "node-2" && n.State == state.NodeMissing })
	})
	if _, err := waitFor3(t, f, builtins.UntilReady, time.Second); !errors.As(err, &te) || !strings.Contains(err.Error(), "1 node(s) missing (3 expected, 2 live)") {
		t.Fatalf("wait with a missing node: %v", err)
	}
	if d := f.statusOf("web"); d.State != builtins.StateProgressing || d.Ready != 2 || d.Total != 3 {
		t.Fatalf("status with a missing node: %+v", d)
	}
}

// objects maps every key of the bucket to its ETag and modification time.
func (f *fleet) objects() map[string]string {
	f.t.Helper()
	infos, err := objstore.ListAll(context.Background(), f.store, "")
	if err != nil {
		f.t.Fatal(err)
	}
	out := make(map[string]string, len(infos))
	for _, i := range infos {
		out[i.Key] = i.ETag + " " + i.LastModified.Format(time.RFC3339Nano)
	}
	return out
}

// revisionOf is the revision deploy commits for image (maxUnavailable
// 100%).
func revisionOf(t *testing.T, f *fleet, image string) string {
	t.Helper()
	ix, _, err := state.ReadIndex(context.Background(), f.store)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range ix.Items() {
		data, err := state.FetchPayload(context.Background(), f.store, it.Entry.Pod)
		if err == nil && strings.Contains(string(data), image) {
			return nodepod.Revision(it.Entry)
		}
	}
	return ""
}

// intervals are, per node, when its Pod was replaced by revision and when
// the new Pod became ready (zero while it is not).
type interval struct {
	node            string
	replaced, ready time.Time
}

func intervalsOf(events []kubeletEvent, revision string) []interval {
	byNode := map[string]*interval{}
	for _, e := range events {
		if e.revision != revision {
			continue
		}
		iv := byNode[e.node]
		if iv == nil {
			iv = &interval{node: e.node}
			byNode[e.node] = iv
		}
		switch e.what {
		case "replaced":
			iv.replaced = e.at
		case "ready":
			if !iv.replaced.IsZero() && iv.ready.IsZero() {
				iv.ready = e.at
			}
		}
	}
	var out []interval
	for _, iv := range byNode {
		if !iv.replaced.IsZero() {
			out = append(out, *iv)
		}
	}
	slices.SortFunc(out, func(a, b interval) int { return a.replaced.Compare(b.replaced) })
	return out
}

// maxBetween is the largest number of nodes between revisions at once:
// replaced and not yet ready.
func maxBetween(ivs []interval) int {
	best := 0
	for _, a := range ivs {
		n := 0
		for _, b := range ivs {
			end := b.ready
			if end.IsZero() {
				end = time.Now()
			}
			if !b.replaced.After(a.replaced) && end.After(a.replaced) {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// rollout runs three nodes whose Pods take readyAfter to become ready,
// deploys v1, waits until it is ready, then deploys image with
// maxUnavailable and waits again; it returns the revision and each node's
// interval between revisions.
func (f *fleet) rollout(t *testing.T, image, maxUnavailable string, readyAfter time.Duration) (string, []interval) {
	t.Helper()
	for i := range 3 {
		f.start(i, readyAt(readyAfter))
	}
	ctx := context.Background()
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := f.deploy(dctx, "hello:v1", maxUnavailable, ""); err != nil {
		t.Fatalf("v1: %v\n%s", err, f.logs())
	}
	f.eventually(time.Minute, "v1 ready on 3 nodes", func() bool { return f.statusOf("web").State == builtins.StateReady })
	r, err := f.deploy(dctx, image, maxUnavailable, builtins.UntilReady)
	if err != nil {
		t.Fatalf("%s: %v\n%s", image, err, f.logs())
	}
	for _, e := range f.events() {
		if e.what == "withdrawn-late" {
			t.Errorf("%s's Pod was replaced while the stored snapshot still had its endpoint", e.node)
		}
	}
	return r.Revision, intervalsOf(f.events(), r.Revision)
}

// With maxUnavailable 1 (the DaemonSet default) the three nodes replace
// their Pods one after the other: no two are ever between revisions at
// once, and each node's endpoint leaves the stored snapshot before its
// Pod is replaced.
func TestRollingUpdateOneNodeAtATime(t *testing.T) {
	f := newFleet(t, 3)
	_, ivs := f.rollout(t, "hello:v2", "", 300*time.Millisecond)
	if len(ivs) != 3 {
		t.Fatalf("replaced %d nodes, want 3: %+v", len(ivs), ivs)
	}
	for i := 1; i < len(ivs); i++ {
		if !ivs[i].replaced.After(ivs[i-1].ready) {
			t.Errorf("%s was replaced at %s, before %s's new Pod was ready at %s", ivs[i].node, ivs[i].replaced.Format(time.StampMicro),
				ivs[i-1].node, ivs[i-1].ready.Format(time.StampMicro))
		}
	}
	if n := maxBetween(ivs); n != 1 {
		t.Fatalf("%d nodes between revisions at once, want 1: %+v", n, ivs)
	}
	for _, iv := range ivs {
		t.Logf("%s: replaced %s, ready after %s", iv.node, iv.replaced.Format("15:04:05.000"), iv.ready.Sub(iv.replaced).Round(time.Millisecond))
	}
}

// maxUnavailable 34% of 3 nodes (1.02) rounds up, as Kubernetes' DaemonSet
// controller rounds it, to 2: two nodes update together, never three.
// Rounding down or to the nearest would allow only one.
func TestRollingUpdatePercentageRoundsUp(t *testing.T) {
	f := newFleet(t, 3)
	// Pods take 2 s to become ready: long enough for every node to ask
	// while two hold slots, even on a loaded machine.
	_, ivs := f.rollout(t, "hello:v2", "34%", 2*time.Second)
	if len(ivs) != 3 {
		t.Fatalf("replaced %d nodes, want 3", len(ivs))
	}
	if n := maxBetween(ivs); n != 2 {
		t.Fatalf("%d nodes between revisions at once, want 2 (34%% of 3 rounded up): %+v", n, ivs)
	}
	for _, iv := range ivs {
		t.Logf("%s: replaced %s, ready after %s", iv.node, iv.replaced.Format("15:04:05.000"), iv.ready.Sub(iv.replaced).Round(time.Millisecond))
	}
}

// startWithV1 starts three nodes whose Pods are ready 50 ms after they
// run, commits v1 (maxUnavailable 1) and waits until status shows it
// ready on all three.
func (f *fleet) startWithV1(t *testing.T) builtins.DeployResult {
	t.Helper()
	for i := range 3 {
		f.start(i, readyAt(50*time.Millisecond))
	}
	dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v1, err := f.deploy(dctx, "hello:v1", "", "")
	if err != nil {
		t.Fatalf("v1: %v\n%s", err, f.logs())
	}
	f.eventually(time.Minute, "v1 ready on 3 nodes", func() bool { return f.statusOf("web").State == builtins.StateReady })
	return v1
}

// runsRevisions checks that the stuck node's static Pod file carries
// stuckRev and every other node's keeps rev.
func (f *fleet) runsRevisions(t *testing.T, stuck, stuckRev, rev string) {
	t.Helper()
	for _, n := range f.nodes {
		b, err := os.ReadFile(filepath.Join(n.root, "etc", "podmin", "manifests", "web.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		want := rev
		if n.id == stuck {
			want = stuckRev
		}
		if !strings.Contains(string(b), nodepod.RevisionAnnotation+": "+want) {
			t.Errorf("%s runs the wrong revision:\n%s", n.id, b)
		}
	}
}

// A node whose new Pod never becomes ready holds the only slot: the
// rollout stops there, the other nodes keep serving the old revision,
// and status and the wait name the stuck node.
func TestStuckNodeStopsTheRollout(t *testing.T) {
	f := newFleet(t, 3)
	v1 := f.startWithV1(t)
	for _, n := range f.nodes {
		n.kube.setBehaviour(func(string) podBehaviour { return podBehaviour{never: true} })
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer wcancel()
	v2, err := f.deploy(wctx, "hello:v2", "", builtins.UntilReady)
	var te *builtins.WaitTimeoutError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "1/3 applied, 0/3 ready") || !strings.Contains(err.Error(), "waiting for a rollout slot") {
		t.Fatalf("deploy --wait with a stuck node: %v\n%s", err, f.logs())
	}
	replaced := intervalsOf(f.events(), v2.Revision)
	if len(replaced) != 1 {
		t.Fatalf("%d nodes replaced their Pod, want 1: %+v", len(replaced), replaced)
	}
	stuck := replaced[0].node
	f.runsRevisions(t, stuck, v2.Revision, v1.Revision)
	d := f.statusOf("web")
	if d.Rollout == nil || !slices.Equal(d.Rollout.Updating, []string{stuck}) || d.Rollout.Waiting != 2 || d.Rollout.Allowed != 1 || d.Rollout.MaxUnavailable != "1" {
		t.Fatalf("rollout status: %+v", d.Rollout)
	}
	for _, n := range d.Nodes {
		if n.Node != stuck && !strings.Contains(n.Waiting, "maxUnavailable 1 allows 1 of 3 node(s) of workers to be unavailable at once: "+stuck) {
			t.Errorf("%s waits for %q", n.Node, n.Waiting)
		}
	}
}

// Past the slot timeout the leader reports the stuck node: status lists
// it as stuck with an error of kind rollout for the revision, so deploy
// --wait fails with that node's error (exit 1) well before its own
// timeout. The slot is taken back but the node still counts as
// unavailable, so the rollout stays stopped: the other nodes keep v1.
func TestStuckNodeIsReportedAfterTheSlotTimeout(t *testing.T) {
	f := newFleet(t, 3)
	f.slotTimeout = time.Second
	v1 := f.startWithV1(t)
	for _, n := range f.nodes {
		n.kube.setBehaviour(func(string) podBehaviour { return podBehaviour{never: true} })
	}
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	start := time.Now()
	v2, err := f.deploy(wctx, "hello:v2", "", builtins.UntilReady)
	took := time.Since(start)
	replaced := intervalsOf(f.events(), v2.Revision)
	if len(replaced) != 1 {
		t.Fatalf("%d nodes replaced their Pod, want 1: %+v\n%s", len(replaced), replaced, f.logs())
	}
	stuck := replaced[0].node
	if !errors.Is(err, builtins.ErrNodeError) || !strings.Contains(err.Error(), stuck+" (rollout): did not report revision "+v2.Revision[:12]+" ready within 1s of its rollout slot") {
		t.Fatalf("deploy --wait with a node stuck past the slot timeout: %v\n%s", err, f.logs())
	}
	d := f.statusOf("web")
	if d.State != builtins.StateFailed || d.Rollout == nil || !slices.Equal(d.Rollout.Stuck, []string{stuck}) || d.Rollout.Waiting != 2 {
		t.Fatalf("status of a stuck rollout: %+v, rollout %+v", d, d.Rollout)
	}
	if len(d.Errors) != 1 || d.Errors[0].Node != stuck || d.Errors[0].Kind != state.ErrorRollout || d.Errors[0].Revision != v2.Revision {
		t.Fatalf("errors: %+v", d.Errors)
	}
	// An observation window, not a wait for a condition: over two more
	// slot timeouts nobody else is replaced.
	time.Sleep(2 * f.slotTimeout)
	if n := len(intervalsOf(f.events(), v2.Revision)); n != 1 {
		t.Fatalf("%d nodes replaced their Pod after the slot timeout, want 1", n)
	}
	f.runsRevisions(t, stuck, v2.Revision, v1.Revision)
	t.Logf("deploy --wait failed %s after the commit with %v", took.Round(time.Millisecond), err)
}

// betweenOf is, per node, each stretch between revisions: from a Pod
// replaced by one of revisions until the Pod of the revision it then
// runs is ready (a replacement while between extends the stretch).
func betweenOf(events []kubeletEvent, revisions ...string) []interval {
	open := map[string]*interval{}
	current := map[string]string{}
	var out []interval
	for _, e := range events {
		switch {
		case e.what == "replaced" && slices.Contains(revisions, e.revision):
			if open[e.node] == nil {
				open[e.node] = &interval{node: e.node, replaced: e.at}
			}
			current[e.node] = e.revision
		case e.what == "ready" && open[e.node] != nil && current[e.node] == e.revision:
			iv := open[e.node]
			iv.ready = e.at
			out = append(out, *iv)
			delete(open, e.node)
		}
	}
	for _, iv := range open {
		out = append(out, *iv)
	}
	slices.SortFunc(out, func(a, b interval) int { return a.replaced.Compare(b.replaced) })
	return out
}

// A commit in the middle of a rolling update (maxUnavailable 1)
// supersedes it: the node that was updating to v2 goes on to v3 at once
// (its Pod serves nothing anyway), no other node ever runs v2, and v3
// rolls out one node at a time; never are two nodes between revisions.
func TestNewCommitMidRolloutSupersedes(t *testing.T) {
	f := newFleet(t, 3)
	f.startWithV1(t)
	for _, n := range f.nodes {
		n.kube.setBehaviour(readyAt(time.Second))
	}
	ctx := context.Background()
	v2, err := f.deploy(ctx, "hello:v2", "", "")
	if err != nil {
		t.Fatal(err)
	}
	f.eventually(30*time.Second, "a node runs v2", func() bool { return len(intervalsOf(f.events(), v2.Revision)) > 0 })
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	start := time.Now()
	v3, err := f.deploy(dctx, "hello:v3", "", builtins.UntilReady)
	if err != nil {
		t.Fatalf("deploy --wait of v3 mid-rollout: %v\n%s", err, f.logs())
	}
	took := time.Since(start)
	events := f.events()
	if ivs := intervalsOf(events, v2.Revision); len(ivs) != 1 {
		t.Fatalf("%d nodes ran v2, want only the one updating when v3 was committed: %+v", len(ivs), ivs)
	}
	if ivs := intervalsOf(events, v3.Revision); len(ivs) != 3 {
		t.Fatalf("%d nodes run v3, want 3: %+v", len(ivs), ivs)
	}
	ivs := betweenOf(events, v2.Revision, v3.Revision)
	if n := maxBetween(ivs); n != 1 {
		t.Fatalf("%d nodes between revisions at once, want 1: %+v", n, ivs)
	}
	for _, iv := range ivs {
		t.Logf("%s: between revisions from %s for %s", iv.node, iv.replaced.Format("15:04:05.000"), iv.ready.Sub(iv.replaced).Round(time.Millisecond))
	}
	t.Logf("v3 ready on 3 nodes %s after its commit", took.Round(time.Millisecond))
}
