// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// statusVerify is how often the leader checks, with one conditional read
// per NodeGroup, that the stored status objects are still its writes, and
// re-reads the cluster configuration. With more than statusVerifyPerMinute
// NodeGroups each is checked less often (statusVerifyEvery), so an idle
// cluster's bucket requests do not grow with its NodeGroups.
const (
	statusVerify          = time.Minute
	statusVerifyPerMinute = 10
)

// statusVerifyEvery is how often each of n NodeGroups' status objects is
// checked: once a statusVerify, or, past statusVerifyPerMinute NodeGroups,
// statusVerifyPerMinute checks a minute over all of them (a status object
// deleted or edited by hand is rewritten within this period; any change
// of what the nodes report rewrites it at once).
func statusVerifyEvery(n int) time.Duration {
	return max(statusVerify, time.Duration(n)*time.Minute/statusVerifyPerMinute)
}

// observed is one leadership's view of what the nodes report about their
// deployments, and of the status objects it wrote. It is guarded by the
// leaderState's mutex, except dirty.
type observed struct {
	dirty chan struct{}
	// acquired is when the leadership began; seeded the nodes its
	// predecessor knew (the stored registry), which it waits for.
	acquired time.Time
	seeded   []string
	nodes    map[string]*nodeStatus
	// lost are nodes this leadership heard from and no longer does.
	lost map[string]lostNode
	// refused are the node claims this leadership refused, by node ID and
	// address (refused.go).
	refused map[string]refusal
	// written is the last status object written per NodeGroup.
	written map[string]*writtenStatus
	// verifyEvery is how often each status object is checked
	// (statusVerifyEvery of the NodeGroups last counted).
	verifyEvery time.Duration
	// superseded is set when a later leader wrote a status object.
	superseded bool
}

type nodeStatus struct {
	nodegroup   string
	kubelet     bool
	deployments map[string]*pb.DeploymentReport
	// reportedAt is when each deployment's report last changed.
	reportedAt map[string]time.Time
}

type lostNode struct {
	nodegroup, addr string
	at              time.Time
}

type writtenStatus struct {
	// content is the encoding without UpdatedAt, to compare.
	content  []byte
	etag     string
	read     bool // the stored object was read in this leadership
	verified time.Time
}

func newObserved(now time.Time, seeded []string) *observed {
	return &observed{dirty: make(chan struct{}, 1), acquired: now, seeded: seeded, nodes: map[string]*nodeStatus{},
		lost: map[string]lostNode{}, written: map[string]*writtenStatus{}, refused: map[string]refusal{}}
}

func (o *observed) markDirty() {
	select {
	case o.dirty <- struct{}{}:
	default:
	}
}

// settled reports whether every node the predecessor knew has reported or
// gone, or a lease window passed: until then a node may look missing or
// unreported only because it has not reached the new leader yet. It is
// what the status object says; rollout slots do not wait for it (a node
// without a report counts as unavailable, one that is gone as missing).
func (o *observed) settled(l *leaderState, now time.Time, retention time.Duration) bool {
	if now.Sub(o.acquired) >= retention {
		return true
	}
	for _, id := range o.seeded {
		if _, reported := o.nodes[id]; !reported {
			if _, live := l.nodes.nodes[id]; live {
				return false
			}
		}
	}
	return true
}

// inGroup returns the IDs of the registered nodes of a NodeGroup, sorted.
func (r *registry) inGroup(ng string) []string {
	var out []string
	for id, reg := range r.nodes {
		if reg.node.NodeGroup == ng {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// reportStatus replaces what a node reports about its deployments. A
// change marks the status dirty; a report that shows a granted revision
// ready frees its slot at once, and one that shows a Pod available that
// was not (or was not reported to this leadership) tells the waiting
// nodes to ask again, so that after a failover the rollout resumes as
// soon as the live nodes have reported.
func (c *Coordinator) reportStatus(l *leaderState, n api.Node, r *pb.StatusReport, now time.Time) {
	node := n.ID
	l.mu.Lock()
	st := l.obs.nodes[node]
	if st == nil {
		st = &nodeStatus{nodegroup: n.NodeGroup, deployments: map[string]*pb.DeploymentReport{}, reportedAt: map[string]time.Time{}}
		l.obs.nodes[node] = st
		l.obs.markDirty()
	}
	wasKubelet := st.kubelet
	var became []string
	delete(l.obs.lost, node)
	if st.kubelet != r.GetKubelet() {
		st.kubelet = r.GetKubelet()
		l.obs.markDirty()
	}
	seen := map[string]bool{}
	for _, d := range r.GetDeployments() {
		seen[d.GetName()] = true
		old := st.deployments[d.GetName()]
		if old != nil && proto.Equal(old, d) {
			continue
		}
		if available(d, r.GetKubelet()) && (old == nil || !available(old, wasKubelet)) {
			became = append(became, d.GetName())
		}
		st.deployments[d.GetName()] = d
		st.reportedAt[d.GetName()] = now
		l.obs.markDirty()
	}
	for name := range st.deployments {
		if !seen[name] {
			delete(st.deployments, name)
			delete(st.reportedAt, name)
			l.obs.markDirty()
		}
	}
	l.nodes.heard(node, now)
	freed, stuck := l.releaseSlots(now, c.opts.SlotTimeout, l.live(now, c.opts.Retention))
	freed = freed || l.waitingFor(became)
	l.mu.Unlock()
	c.slotsChanged(freed, stuck)
}

// slotsChanged tells the waiting nodes that a slot freed and logs the
// nodes found stuck.
func (c *Coordinator) slotsChanged(freed bool, stuck []string) {
	for _, s := range stuck {
		c.log.Warn("rollout stuck: the slot is taken back, and the node counts as unavailable until its Pod is ready", "detail", s)
	}
	if freed {
		c.server.Broadcast(&pb.Hint{Kind: pb.Hint_SLOT_FREED})
		if c.opts.OnSlotFreed != nil {
			c.opts.OnSlotFreed()
		}
	}
}

// ReportStatus implements api.RolloutBackend.
func (c *Coordinator) ReportStatus(_ context.Context, n api.Node, r *pb.StatusReport) error {
	l, err := c.leading()
	if err != nil {
		return err
	}
	c.reportStatus(l, n, r, c.clock.Now())
	return nil
}

// leadStatus publishes the NodeGroups' status objects while this node
// leads: when a report changes what they say, and every renew interval
// (nodes expire, slots time out, sizes change).
func (c *Coordinator) leadStatus(ctx context.Context, l *leaderState) {
	for {
		c.publishStatus(ctx, l)
		select {
		case <-ctx.Done():
			return
		case <-l.obs.dirty:
		case <-c.clock.After(c.timing.Renew):
		}
	}
}

// publishStatus writes the status object of every NodeGroup whose content
// changed, and rewrites one that is no longer this leadership's write.
func (c *Coordinator) publishStatus(ctx context.Context, l *leaderState) {
	if !c.elector.IsLeader() {
		return
	}
	c.reportOwnStatus() // renews this node's own registration like its reports do
	now := c.clock.Now()
	sizes := c.sizes.read(ctx, now)
	l.mu.Lock()
	if l.obs.superseded {
		l.mu.Unlock()
		return
	}
	l.nodes.expire(now, c.opts.Retention)
	for id, st := range l.obs.nodes {
		if _, live := l.nodes.nodes[id]; !live {
			delete(l.obs.nodes, id)
			l.obs.lost[id] = lostNode{nodegroup: st.nodegroup, at: now}
		}
	}
	freed, stuck := l.releaseSlots(now, c.opts.SlotTimeout, l.live(now, c.opts.Retention))
	groups := map[string]bool{}
	for _, r := range l.obs.refused {
		groups[r.nodegroup] = true
	}
	for _, reg := range l.nodes.nodes {
		groups[reg.node.NodeGroup] = true
	}
	for _, n := range l.obs.lost {
		groups[n.nodegroup] = true
	}
	for ng := range sizes {
		groups[ng] = true
	}
	for ng := range l.obs.written {
		groups[ng] = true
	}
	l.obs.verifyEvery = statusVerifyEvery(len(groups))
	type pending struct {
		ng      string
		status  *state.NodeGroupStatus
		content []byte
	}
	var todo []pending
	for _, ng := range slices.Sorted(maps.Keys(groups)) {
		if ng == "" {
			continue
		}
		s := c.buildStatus(l, ng, sizes, now)
		content, err := s.Encode()
		if err != nil {
			continue
		}
		w := l.obs.written[ng]
		if w != nil && string(w.content) == string(content) && now.Sub(w.verified) < l.obs.verifyEvery {
			continue
		}
		todo = append(todo, pending{ng: ng, status: s, content: content})
	}
	l.mu.Unlock()
	c.slotsChanged(freed, stuck)
	c.checkWithdrawals(l) // nodes that left, and the bound of the wait
	for _, p := range todo {
		if err := c.writeStatus(ctx, l, p.ng, p.status, p.content, now); err != nil {
			if errors.Is(err, ErrSuperseded) {
				c.log.Error("a later leader wrote a NodeGroup status: this node stops writing status", "nodegroup", p.ng, "err", err)
				return
			}
			if ctx.Err() == nil {
				c.log.Warn("writing the NodeGroup status failed: retrying", "nodegroup", p.ng, "err", err)
				l.obs.markDirty()
			}
		}
	}
}

// buildStatus is the status object of one NodeGroup now (UpdatedAt
// unset). Called with l.mu held.
func (c *Coordinator) buildStatus(l *leaderState, ng string, sizes map[string]int, now time.Time) *state.NodeGroupStatus {
	s := &state.NodeGroupStatus{NodeGroup: ng, Leader: c.opts.NodeID, Term: l.writer.Term(), Settled: l.obs.settled(l, now, c.opts.Retention)}
	if size, ok := sizes[ng]; ok {
		s.Expected = &size
	}
	live := l.nodes.inGroup(ng)
	s.Live = len(live)
	type waiting struct {
		n        int
		revision string
	}
	rolls := map[string]*state.RolloutStatus{}
	roll := func(name string) *state.RolloutStatus {
		r := rolls[name]
		if r == nil {
			r = &state.RolloutStatus{Name: name}
			rolls[name] = r
		}
		return r
	}
	for _, id := range live {
		reg := l.nodes.nodes[id]
		ns := state.NodeStatus{Node: id, Address: reg.node.Addr.String(), State: state.NodeLive}
		if st := l.obs.nodes[id]; st != nil {
			ns.Kubelet = st.kubelet
			for _, name := range slices.Sorted(maps.Keys(st.deployments)) {
				d := st.deployments[name]
				rep := reportOf(d, st.reportedAt[name])
				if g, ok := l.ro.stuck[slotKey{node: id, deployment: name}]; ok && rep.Error == nil {
					rep.Error = &state.ReportedError{Kind: state.ErrorRollout, Revision: g.revision,
						Message: fmt.Sprintf("did not report revision %s ready within %s of its rollout slot", short(g.revision), c.opts.SlotTimeout)}
				}
				if rep.Waiting != "" {
					r := roll(name)
					r.Waiting++
					r.Revision = cmp.Or(r.Revision, rep.Desired)
				}
				ns.Deployments = append(ns.Deployments, rep)
			}
		}
		s.Nodes = append(s.Nodes, ns)
	}
	for sk, g := range l.ro.grants {
		if g.nodegroup == ng {
			r := roll(sk.deployment)
			r.Updating = append(r.Updating, sk.node)
			r.Revision = g.revision
		}
	}
	for sk, g := range l.ro.stuck {
		if g.nodegroup == ng {
			r := roll(sk.deployment)
			r.Stuck = append(r.Stuck, sk.node)
			r.Revision = cmp.Or(r.Revision, g.revision)
		}
	}
	for name, r := range rolls {
		slices.Sort(r.Updating)
		slices.Sort(r.Stuck)
		if st, ok := l.ro.strategy[state.Key{NodeGroup: ng, Name: name}]; ok {
			r.MaxUnavailable, r.MaxSurge, r.Allowed = st.value, st.surge, st.allowed
			r.Revision = cmp.Or(r.Revision, st.revision)
		}
		s.Rollouts = append(s.Rollouts, *r)
	}
	slices.SortFunc(s.Rollouts, func(a, b state.RolloutStatus) int { return cmp.Compare(a.Name, b.Name) })
	if s.Expected != nil && *s.Expected > s.Live {
		s.Missing = *s.Expected - s.Live
		var lost []string
		for id, n := range l.obs.lost {
			if n.nodegroup == ng {
				lost = append(lost, id)
			}
		}
		slices.SortFunc(lost, func(a, b string) int {
			return cmp.Or(l.obs.lost[b].at.Compare(l.obs.lost[a].at), cmp.Compare(a, b))
		})
		for _, id := range lost[:min(len(lost), s.Missing)] {
			s.Nodes = append(s.Nodes, state.NodeStatus{Node: id, State: state.NodeMissing})
		}
	}
	slices.SortFunc(s.Nodes, func(a, b state.NodeStatus) int { return cmp.Compare(a.Node, b.Node) })
	s.Refused = l.obs.refusedIn(ng, now, c.opts.Retention)
	return s
}

// reportOf turns a node's report into the status object's form.
func reportOf(d *pb.DeploymentReport, at time.Time) state.DeploymentReport {
	r := state.DeploymentReport{Name: d.GetName(), Revision: d.GetRevision(), Desired: d.GetDesired(), Reason: d.GetReason(),
		Restarts: int(d.GetRestarts()), Waiting: d.GetWaiting(), Retiring: d.GetRetiring(), ReportedAt: at.UTC()}
	if ms := d.GetAppliedAtUnixMs(); ms > 0 {
		t := time.UnixMilli(ms).UTC()
		r.AppliedAt = &t
	}
	switch d.GetReadiness() {
	case pb.Readiness_READINESS_READY:
		r.Readiness = state.Ready
	case pb.Readiness_READINESS_NOT_READY:
		r.Readiness = state.NotReady
	default:
		r.Readiness = state.Unknown
	}
	if e := d.GetError(); e != nil {
		r.Error = &state.ReportedError{Kind: e.GetKind(), Message: e.GetMessage(), Revision: e.GetRevision()}
	}
	return r
}

// writeStatus writes one NodeGroup's status object with compare-and-swap:
// the first write of a leadership reads the stored object and refuses to
// write over a later leadership's (ErrSuperseded); every later write is
// conditional on the ETag of the last one.
func (c *Coordinator) writeStatus(ctx context.Context, l *leaderState, ng string, s *state.NodeGroupStatus, content []byte, now time.Time) error {
	key, err := state.NodeGroupStatusPath(ng)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, election.RequestTimeout)
	defer cancel()
	l.mu.Lock()
	w := l.obs.written[ng]
	if w == nil {
		w = &writtenStatus{}
		l.obs.written[ng] = w
	}
	prev, every := *w, max(l.obs.verifyEvery, statusVerify)
	l.mu.Unlock()
	if !prev.read || (string(prev.content) == string(content) && now.Sub(prev.verified) >= every) {
		// Read what is stored: at the start of a leadership (fencing), and
		// to verify an unchanged object once a statusVerifyEvery.
		opts := objstore.GetOptions{}
		if prev.read && prev.etag != "" {
			opts.IfNoneMatch = prev.etag
		}
		obj, err := c.opts.Store.Get(ctx, key, opts)
		switch {
		case errors.Is(err, objstore.ErrNotModified):
			l.mu.Lock()
			w.verified = now
			l.mu.Unlock()
			return nil
		case errors.Is(err, objstore.ErrNotFound):
			prev.etag = ""
		case err != nil:
			return fmt.Errorf("read %s: %w", key, err)
		default:
			if stored, derr := state.DecodeNodeGroupStatus(obj.Data); derr == nil && stored.Term > l.writer.Term() {
				l.mu.Lock()
				l.obs.superseded = true
				l.mu.Unlock()
				return fmt.Errorf("%w: %s holds term %d", ErrSuperseded, key, stored.Term)
			}
			prev.etag = obj.ETag
		}
	}
	s.UpdatedAt = now.UTC()
	data, err := s.Encode()
	if err != nil {
		return err
	}
	var etag string
	if prev.etag == "" {
		etag, err = c.opts.Store.PutIfAbsent(ctx, key, data)
	} else {
		etag, err = c.opts.Store.PutIfMatch(ctx, key, data, prev.etag)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		w.read = false // read it again before the next attempt
		return fmt.Errorf("write %s: %w", key, err)
	}
	*w = writtenStatus{content: content, etag: etag, read: true, verified: now}
	return nil
}
