// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// SlotTimeout is how long a node may hold a rollout slot without
// reporting the new revision ready. Then the slot is taken back and the
// node is reported stuck (an error of kind rollout in the NodeGroup's
// status); the node still counts as unavailable while its Pod is not
// ready, so the rollout does not go on past it. Kubernetes' Deployment
// progress deadline has the same default.
const SlotTimeout = 10 * time.Minute

// slotKey is one node's Pod of one deployment.
type slotKey struct {
	node, deployment string
}

// grant is a rollout slot: the node may replace its Pod with revision.
type grant struct {
	nodegroup, revision string
	at                  time.Time
	// withdrawn is the snapshot written without the endpoints of the
	// node's Pod to be replaced, withdrawnAt when (zero until written);
	// confirmed is set once every live node applied it, or the lease
	// window after it passed (withdraw.go).
	withdrawn   api.Position
	withdrawnAt time.Time
	confirmed   bool
}

// rollouts is one leadership's pacing of rolling updates: the slots it
// granted, the ones that timed out, and each deployment's strategy.
// It is guarded by the leaderState's mutex.
type rollouts struct {
	grants map[slotKey]grant
	stuck  map[slotKey]grant
	// strategy is the last strategy decided on, by deployment key.
	strategy map[state.Key]strategy
}

// strategy is how a deployment's rollout was paced: its maxUnavailable,
// or its maxSurge (surge, "" without one), and how many nodes that
// allows to update (or to run a second Pod) at once.
type strategy struct {
	revision, value, surge string
	allowed                int
}

func newRollouts() *rollouts {
	return &rollouts{grants: map[slotKey]grant{}, stuck: map[slotKey]grant{}, strategy: map[state.Key]strategy{}}
}

// desiredReader reads what the rollout decisions need from the bucket:
// the deployment index (conditionally) and each Pod payload's rolling
// update strategy (once per immutable payload).
type desiredReader struct {
	store Store
	index *IndexCache

	mu       sync.Mutex
	payloads map[string]manifest.Strategy
}

func newDesiredReader(store Store) *desiredReader {
	return &desiredReader{store: store, index: NewIndexCache(store), payloads: map[string]manifest.Strategy{}}
}

// entry returns the committed entry of key, reading the index again only
// when its ETag changed.
func (d *desiredReader) entry(ctx context.Context, key state.Key) (state.Entry, bool, error) {
	ix, _, err := d.index.Read(ctx)
	if err != nil {
		return state.Entry{}, false, err
	}
	e, ok := ix.Lookup(key)
	return e, ok, nil
}

// strategy reads the rolling update strategy of a Pod payload.
func (d *desiredReader) strategy(ctx context.Context, path string) (manifest.Strategy, error) {
	d.mu.Lock()
	v, ok := d.payloads[path]
	d.mu.Unlock()
	if ok {
		return v, nil
	}
	obj, err := d.store.Get(ctx, path, objstore.GetOptions{})
	if err != nil {
		return manifest.Strategy{}, fmt.Errorf("read payload %s: %w", path, err)
	}
	if err := state.VerifyPayload(path, obj.Data); err != nil {
		return manifest.Strategy{}, err
	}
	if v, err = manifest.PodStrategy(obj.Data); err != nil {
		return manifest.Strategy{}, fmt.Errorf("payload %s: %w", path, err)
	}
	d.mu.Lock()
	d.payloads[path] = v
	d.mu.Unlock()
	return v, nil
}

// decideSlot answers a node's request for a slot to replace its Pod of a
// deployment with revision (kind SLOT_REPLACE; the others in surge.go).
// The revision must be the committed one. A
// node that holds the slot already (this leader's, or an earlier
// leader's it reports) keeps it: asking again, after its agent restarted
// say, never takes a second one. A node whose Pod is known broken (it
// reported it not ready, or without a Pod) gets one at once: replacing a
// Pod that serves nothing costs nothing, as Kubernetes replaces
// unavailable Pods first. Any other only while fewer than maxUnavailable
// of the NodeGroup's expected nodes are unavailable: updating, not ready,
// of unknown readiness (kubelet does not answer), without a report since
// this leadership began or their agent restarted, or missing. A granted
// slot is recorded before it is answered.
func (c *Coordinator) decideSlot(ctx context.Context, l *leaderState, n api.Node, deployment, revision string, kind pb.SlotKind) (bool, string, error) {
	key, err := state.NewKey(n.NodeGroup, deployment)
	if err != nil {
		return false, "", err
	}
	entry, ok, err := l.desired.entry(ctx, key)
	if err != nil {
		return false, "", err
	}
	if !ok {
		return false, fmt.Sprintf("deployment %s is not in the deployment index", key), nil
	}
	if want := nodepod.Revision(entry); revision != want {
		return false, fmt.Sprintf("revision %s is not the committed revision %s of %s: reconcile again", short(revision), short(want), key), nil
	}
	st, err := l.desired.strategy(ctx, entry.Pod)
	if err != nil {
		return false, "", err
	}
	mu := st.MaxUnavailable
	sizes := c.sizes.get()
	now := c.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nodes.expire(now, c.opts.Retention)
	nodes := l.nodes.inGroup(n.NodeGroup)
	expected, known := sizes[n.NodeGroup]
	if !known {
		expected = len(nodes)
	}
	allowed := manifest.AllowedUnavailable(mu, expected)
	if kind != pb.SlotKind_SLOT_REPLACE {
		allowed = manifest.AllowedSurge(st.MaxSurge, expected)
		l.ro.strategy[key] = strategy{revision: revision, value: mu.String(), surge: st.MaxSurge.String(), allowed: allowed}
	} else {
		l.ro.strategy[key] = strategy{revision: revision, value: mu.String(), allowed: allowed}
	}
	sk := slotKey{node: n.ID, deployment: deployment}
	record := func() (bool, string, error) {
		l.ro.grants[sk] = grant{nodegroup: n.NodeGroup, revision: revision, at: now}
		delete(l.ro.stuck, sk)
		l.obs.markDirty()
		return true, "", nil
	}
	if g, ok := l.ro.grants[sk]; ok && g.revision == revision {
		return true, "", nil
	}
	if kind == pb.SlotKind_SLOT_RETIRE || l.holds(sk, revision) || l.broken(sk) {
		return record()
	}
	if kind == pb.SlotKind_SLOT_SURGE {
		return l.decideSurge(sk, st.MaxSurge, allowed, expected, nodes, now, record)
	}
	var why []string
	for _, id := range nodes {
		if id == n.ID {
			continue
		}
		if busy, reason := l.unavailable(slotKey{node: id, deployment: deployment}, now); busy {
			why = append(why, id+" "+reason)
		}
	}
	if missing := expected - len(nodes); missing > 0 {
		why = append(why, fmt.Sprintf("%d node(s) missing (%d expected, %d live)", missing, expected, len(nodes)))
	}
	if len(why) < allowed {
		return record()
	}
	return false, fmt.Sprintf("maxUnavailable %s allows %d of %d node(s) of %s to be unavailable at once: %s",
		mu.String(), allowed, expected, n.NodeGroup, strings.Join(why, "; ")), nil
}

// holds reports whether the node reports holding an earlier leader's slot
// for revision. Called with l.mu held.
func (l *leaderState) holds(sk slotKey, revision string) bool {
	st := l.obs.nodes[sk.node]
	if st == nil {
		return false
	}
	d := st.deployments[sk.deployment]
	return d != nil && d.GetGranted() == revision
}

// broken reports whether the node reported its Pod of the deployment as
// serving nothing: kubelet answers and says the Pod is not ready, or the
// node has no static Pod of it. Unknown readiness (kubelet does not
// answer, or has not listed the Pods since the agent started) and no
// report at all are not broken: they only count as unavailable. Called
// with l.mu held.
func (l *leaderState) broken(sk slotKey) bool {
	st := l.obs.nodes[sk.node]
	if st == nil {
		return false
	}
	d := st.deployments[sk.deployment]
	if d == nil || d.GetGranted() != "" {
		return false
	}
	return d.GetRevision() == "" || d.GetReadiness() == pb.Readiness_READINESS_NOT_READY
}

// settled returns what a node last reported when it holds no slot of this
// leader's whose new Pod is not ready yet; otherwise nil and why: the slot,
// or that the node has not reported to this leader at all. Both the pace of
// a rollout (unavailable) and of a maxSurge one (surging) start from it.
func (l *leaderState) settled(sk slotKey, now time.Time) (*nodeStatus, string) {
	if g, ok := l.ro.grants[sk]; ok && !l.readyAt(sk, g.revision) {
		return nil, fmt.Sprintf("is updating to %s (slot granted %s ago)", short(g.revision), now.Sub(g.at).Round(time.Second))
	}
	st := l.obs.nodes[sk.node]
	if st == nil {
		return nil, "has not reported its Pods to this leader yet"
	}
	return st, ""
}

// unavailable reports whether a node's Pod of a deployment serves nothing
// (or may stop at any moment, or nobody can tell) and why. Readiness a
// node cannot know (no kubelet) counts as available once the revision is
// applied: such a node paces its rollout on applied revisions.
func (l *leaderState) unavailable(sk slotKey, now time.Time) (bool, string) {
	st, why := l.settled(sk, now)
	if st == nil {
		return true, why
	}
	d := st.deployments[sk.deployment]
	switch {
	case d == nil:
		return true, "reports no Pod of it"
	case d.GetGranted() != "":
		return true, fmt.Sprintf("is updating to %s (slot of an earlier leader)", short(d.GetGranted()))
	case d.GetRevision() == "":
		return true, "has no static Pod of it"
	case d.GetReadiness() == pb.Readiness_READINESS_READY:
		return false, ""
	case d.GetReadiness() == pb.Readiness_READINESS_UNKNOWN && !st.kubelet:
		return false, ""
	case d.GetReadiness() == pb.Readiness_READINESS_UNKNOWN:
		return true, "is of unknown readiness: " + cmp.Or(d.GetReason(), "no reason given")
	}
	return true, "is not ready: " + cmp.Or(d.GetReason(), "no reason given")
}

// readyAt reports whether the node reports revision of the deployment
// applied and ready (or applied, without a kubelet), and no second Pod of
// it running beside.
func (l *leaderState) readyAt(sk slotKey, revision string) bool {
	st := l.obs.nodes[sk.node]
	if st == nil {
		return false
	}
	d := st.deployments[sk.deployment]
	if d == nil || d.GetRevision() != revision || d.GetRetiring() != "" {
		return false
	}
	return d.GetReadiness() == pb.Readiness_READINESS_READY || d.GetReadiness() == pb.Readiness_READINESS_UNKNOWN && !st.kubelet
}

// releaseSlots frees the slots of nodes that report their revision ready,
// takes back the ones held past the slot timeout (the node is reported
// stuck) and the ones of nodes that left; it reports whether a slot
// freed. Called with l.mu held.
func (l *leaderState) releaseSlots(now time.Time, timeout time.Duration, live func(string) bool) (freed bool, stuck []string) {
	for sk, g := range l.ro.grants {
		switch {
		case l.readyAt(sk, g.revision), !live(sk.node):
			delete(l.ro.grants, sk)
			freed = true
		case now.Sub(g.at) > timeout:
			delete(l.ro.grants, sk)
			l.ro.stuck[sk] = g
			freed = true
			stuck = append(stuck, fmt.Sprintf("%s: %s did not report revision %s ready within %s of its rollout slot", sk.deployment, sk.node, short(g.revision), timeout))
		}
	}
	for sk, g := range l.ro.stuck {
		if l.readyAt(sk, g.revision) || !live(sk.node) {
			delete(l.ro.stuck, sk)
			freed = true
		}
	}
	if freed {
		l.obs.markDirty() // the status object's rollouts changed
	}
	slices.Sort(stuck)
	return freed, stuck
}

// short is a revision as people read it.
func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// AcquireSlot implements api.RolloutBackend: a granted slot replaces the
// node's endpoints with eps (those of the Pod to be replaced withdrawn)
// and the snapshot without them is written before it answers; the answer
// says whether every live node has applied that snapshot yet.
func (c *Coordinator) AcquireSlot(ctx context.Context, n api.Node, req *pb.SlotRequest, eps []api.Endpoint) (*pb.SlotResponse, error) {
	l, err := c.leading()
	if err != nil {
		return nil, err
	}
	sk := slotKey{node: n.ID, deployment: req.GetDeployment()}
	l.mu.Lock()
	_, held := l.ro.grants[sk]
	l.mu.Unlock()
	granted, reason, err := c.decideSlot(ctx, l, n, req.GetDeployment(), req.GetRevision(), req.GetKind())
	if err != nil || !granted {
		return &pb.SlotResponse{Reason: reason}, err
	}
	if req.GetKind() == pb.SlotKind_SLOT_SURGE {
		// Nothing is withdrawn: the running Pod keeps serving beside the
		// new one until it retires (SLOT_RETIRE).
		if !held {
			c.log.Info("rollout slot granted: the node starts the new revision beside the running one", "peer", n.ID,
				"deployment", n.NodeGroup+"/"+req.GetDeployment(), "revision", short(req.GetRevision()))
		}
		return &pb.SlotResponse{Granted: true, Confirmed: true}, nil
	}
	out := make([]Endpoint, 0, len(eps))
	for _, e := range eps {
		out = append(out, Endpoint{Service: ServiceID{Namespace: e.Namespace, Name: e.Service}, Addr: e.Addr})
	}
	written, err := c.grantWithdraw(ctx, l, sk, out)
	if err != nil {
		return nil, fmt.Errorf("write the snapshot without the endpoints of the Pod to be replaced: %w", err)
	}
	if !held {
		c.log.Info("rollout slot granted", "peer", n.ID, "deployment", n.NodeGroup+"/"+req.GetDeployment(), "revision", short(req.GetRevision()))
	}
	l.mu.Lock()
	confirmed, waiting := c.withdrawal(l, sk, c.clock.Now())
	l.mu.Unlock()
	return &pb.SlotResponse{Granted: true, Term: written.Term, Generation: written.Generation, SnapshotRevision: written.Revision,
		Confirmed: confirmed, Unconfirmed: waiting}, nil
}

// available reports whether a report shows the Pod serving: ready, or
// applied on a node without a kubelet.
func available(d *pb.DeploymentReport, kubelet bool) bool {
	if d.GetRevision() == "" || d.GetGranted() != "" {
		return false
	}
	return d.GetReadiness() == pb.Readiness_READINESS_READY || d.GetReadiness() == pb.Readiness_READINESS_UNKNOWN && !kubelet
}

// live returns whether a node's registration is live at now. Called with
// l.mu held, as is the function it returns.
func (l *leaderState) live(now time.Time, retention time.Duration) func(string) bool {
	return func(id string) bool {
		_, ok := l.nodes.lookup(id, now, retention)
		return ok
	}
}

// waitingFor reports whether a node waits for a rollout slot of one of
// the deployments. Called with l.mu held.
func (l *leaderState) waitingFor(deployments []string) bool {
	for _, st := range l.obs.nodes {
		for _, name := range deployments {
			if d := st.deployments[name]; d != nil && d.GetWaiting() != "" {
				return true
			}
		}
	}
	return false
}
