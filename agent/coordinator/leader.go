// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator/election"
)

// leaderState is one leadership's view of the nodes: their registrations
// and reports.
type leaderState struct {
	writer *Writer
	dirty  chan struct{}
	// write serializes building and writing snapshots (the lead loop and
	// Leave).
	write sync.Mutex

	mu      sync.Mutex
	reports map[string]nodeReport
	nodes   *registry
	// owners maps each Service of the index to the NodeGroup that defines
	// it, as last read; nil before the first read.
	owners map[ServiceID]string
	snap   *pb.ServiceSnapshot
	// obs, ro and desired are observed state and rolling updates
	// (status.go, rollout.go).
	obs     *observed
	ro      *rollouts
	desired *desiredReader
	// applied is the snapshot each node last confirmed its Service DNS
	// and dataplane hold, appliedAt when (withdraw.go).
	applied   map[string]api.Position
	appliedAt map[string]time.Time
}

type nodeReport struct {
	eps []Endpoint
	at  time.Time
}

func (l *leaderState) report(node string, eps []Endpoint, now time.Time) {
	l.mu.Lock()
	l.reports[node] = nodeReport{eps: append([]Endpoint(nil), eps...), at: now}
	l.nodes.heard(node, now)
	l.mu.Unlock()
	l.markDirty()
}

func (l *leaderState) markDirty() {
	select {
	case l.dirty <- struct{}{}:
	default:
	}
}

// fresh returns the reports heard within retention and the registered
// nodes, expiring the rest.
func (l *leaderState) fresh(now time.Time, retention time.Duration) ([]NodeReport, []*pb.Node) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []NodeReport
	for node, r := range l.reports {
		if now.Sub(r.at) > retention {
			delete(l.reports, node)
			continue
		}
		out = append(out, NodeReport{NodeID: node, Endpoints: r.eps})
	}
	l.nodes.expire(now, retention)
	return out, l.nodes.list()
}

func (l *leaderState) position() api.Position {
	l.mu.Lock()
	defer l.mu.Unlock()
	return api.Position{Term: l.writer.Term(), Generation: l.writer.Generation(), Revision: l.snap.GetRevision()}
}

func (l *leaderState) current() *pb.ServiceSnapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.snap
}

// self is this node's registration.
func (c *Coordinator) self() api.Node {
	return api.Node{ID: c.opts.NodeID, NodeGroup: c.opts.NodeGroup, Addr: c.opts.Advertise.Addr(), PodPrefix: c.opts.PodPrefix}
}

// acquire is the election's acquire hook: it claims the next snapshot
// generation under the lease term (an error steps down) and starts the
// leader's work from the last published snapshot's node registrations and
// backends (seedSnapshot), so a failover or a restart of the leader's
// agent neither forgets which node holds which prefix nor drops the
// backends of live nodes until they report otherwise.
func (c *Coordinator) acquire(ctx context.Context, term election.Term) error {
	w := NewWriter(c.opts.Store, c.opts.NodeID)
	bctx, cancel := context.WithTimeout(ctx, election.RequestTimeout)
	defer cancel()
	stored, err := w.Begin(bctx, term.Record.Term)
	var stale *StaleTermError
	if errors.As(err, &stale) {
		c.elector.RaiseTerm(stale.Stored)
	}
	if err != nil {
		return err
	}
	now := c.clock.Now()
	l := &leaderState{writer: w, dirty: make(chan struct{}, 1), reports: map[string]nodeReport{}, nodes: newRegistry(),
		ro: newRollouts(), desired: newDesiredReader(c.opts.Store), applied: map[string]api.Position{}, appliedAt: map[string]time.Time{}}
	l.nodes.seed(stored.GetNodes(), now)
	c.mu.Lock()
	known, local := c.localKnown(), c.local
	if c.node.appliedSet {
		l.applied[c.opts.NodeID] = c.node.applied
	}
	c.mu.Unlock()
	seeds := c.seedSnapshot(stored, term, now)
	c.seed(l, seeds, now, known)
	// The leader's own claim stands: a stored record in its way is stale.
	self := c.self()
	for id, reg := range l.nodes.nodes {
		if id == self.ID || reg.node.Addr == self.Addr || reg.node.PodPrefix == self.PodPrefix {
			if id != self.ID {
				c.log.Warn("dropping a stored node registration that claims this leader's address or Pod prefix", "peer", id, "peer_addr", reg.node.Addr.String())
				delete(l.reports, id)
			}
			delete(l.nodes.nodes, id)
		}
	}
	l.nodes.nodes[self.ID] = registration{node: self, seen: now}
	var seeded []string
	for id := range l.nodes.nodes {
		if id != self.ID {
			seeded = append(seeded, id)
		}
	}
	l.obs = newObserved(now, seeded)
	c.mu.Lock()
	if known {
		l.reports[c.opts.NodeID] = nodeReport{eps: local, at: now}
	}
	c.leader = l
	c.mu.Unlock()
	c.log.Info("leading: collecting endpoints", "term", term.Record.Term, "generation", w.Generation(), "known_nodes", len(stored.GetNodes()),
		"kept_endpoints_of", len(l.reports), "own_endpoints_known", known)
	c.leadership.Go(func() { c.lead(ctx, l) })
	c.leadership.Go(func() { c.leadStatus(ctx, l) })
	c.leadership.Go(func() { c.heartbeat(ctx) })
	if c.opts.Index != nil {
		c.leadership.Go(func() { c.pollIndex(ctx, l) })
	}
	c.reportOwnStatus()
	return nil
}

// lose is the election's lose hook.
func (c *Coordinator) lose(term election.Term, reason string) {
	c.mu.Lock()
	c.leader = nil
	c.mu.Unlock()
	c.indexSeen.Store(nil)
	c.server.EndWatches()
	c.poke()
}

// lead rebuilds and persists the snapshot when reports arrive and every
// renew interval, until leadership ends. Once a renew interval, on its
// own timer that reports do not put off, the pass also verifies the
// stored object, so a corrupt or deleted one is rewritten within one
// interval however busy the cluster is.
func (c *Coordinator) lead(ctx context.Context, l *leaderState) {
	verifyAt := c.clock.Now()
	for {
		verify := !c.clock.Now().Before(verifyAt)
		if verify {
			verifyAt = c.clock.Now().Add(c.timing.Renew)
		}
		_, _ = c.publish(ctx, l, verify)
		select {
		case <-ctx.Done():
			return
		case <-l.dirty:
		case <-c.clock.After(verifyAt.Sub(c.clock.Now())):
		}
	}
}

// errNotLeading reports a write attempted after the lease lapsed.
var errNotLeading = errors.New("this node does not lead")

// publish builds the snapshot from the fresh reports and the index's
// Services and writes it when it changed (or, with verify, when the stored
// object is no longer this leadership's last write).
func (c *Coordinator) publish(ctx context.Context, l *leaderState, verify bool) (*pb.ServiceSnapshot, error) {
	l.write.Lock()
	defer l.write.Unlock()
	now := c.clock.Now()
	c.mu.Lock()
	self, known := c.local, c.localKnown()
	c.mu.Unlock()
	l.mu.Lock()
	if known {
		// Until then the endpoints its Pods served before this agent
		// started (seeded) stay, for at most the retention window.
		l.reports[c.opts.NodeID] = nodeReport{eps: self, at: now}
	}
	// The leader's own registration never lapses while it leads.
	l.nodes.nodes[c.opts.NodeID] = registration{node: c.self(), seen: now}
	l.mu.Unlock()
	reports, nodes := l.fresh(now, c.opts.Retention)
	services, err := c.indexServices(ctx, l, reports)
	if err != nil {
		c.log.Warn("reading the Services failed: keeping the last snapshot", "err", err)
		return nil, err
	}
	snap := BuildSnapshot(services, reports)
	snap.Nodes = nodes
	if !c.elector.IsLeader() {
		return nil, errNotLeading // the lease lapsed: the next leader writes
	}
	wctx, cancel := context.WithTimeout(ctx, election.RequestTimeout)
	defer cancel()
	if verify {
		repair, err := l.writer.Verify(wctx)
		if err != nil {
			return nil, c.writeFailed(ctx, err)
		}
		if repair != "" {
			c.log.Warn("the stored snapshot is not this leader's last write: rewriting it", "key", SnapshotKey, "found", repair)
		}
	}
	start := time.Now()
	written, err := l.writer.Write(wctx, snap)
	if err != nil {
		return nil, c.writeFailed(ctx, err)
	}
	l.mu.Lock()
	changed := l.snap != written
	l.snap = written
	l.mu.Unlock()
	if c.cache.Adopt(written, now) || changed {
		c.log.Info("snapshot written", "term", written.Term, "generation", written.Generation, "revision", written.Revision, "took", time.Since(start))
		c.server.Broadcast(&pb.Hint{Kind: pb.Hint_SNAPSHOT_CHANGED, Generation: written.Generation, Revision: written.Revision})
	}
	c.publishView()
	return written, nil
}

func (c *Coordinator) writeFailed(ctx context.Context, err error) error {
	if errors.Is(err, ErrSuperseded) {
		c.log.Error("a later leader wrote the snapshot: this node stops writing", "err", err)
	} else if ctx.Err() == nil {
		c.log.Warn("writing the snapshot failed: retrying", "err", err)
	}
	return err
}

// indexServices returns the Services to publish: the index's (remembering which
// NodeGroup defines each), or without Options.Services those with
// endpoints.
func (c *Coordinator) indexServices(ctx context.Context, l *leaderState, reports []NodeReport) ([]ServiceID, error) {
	var services []ServiceID
	if c.opts.Services == nil {
		seen := map[ServiceID]bool{}
		for _, r := range reports {
			for _, e := range r.Endpoints {
				if !seen[e.Service] {
					seen[e.Service] = true
					services = append(services, e.Service)
				}
			}
		}
		return services, nil
	}
	indexed, err := c.opts.Services(ctx)
	if err != nil {
		return nil, err
	}
	owners := make(map[ServiceID]string, len(indexed))
	for _, s := range indexed {
		services = append(services, s.ID)
		owners[s.ID] = s.NodeGroup
	}
	l.mu.Lock()
	l.owners = owners
	l.mu.Unlock()
	return services, nil
}

// leading returns the leadership state, or an error when this node does
// not lead.
func (c *Coordinator) leading() (*leaderState, error) {
	c.mu.Lock()
	l := c.leader
	c.mu.Unlock()
	if l == nil {
		return nil, errNotLeading
	}
	return l, nil
}

// Register implements api.Backend.
func (c *Coordinator) Register(_ context.Context, n api.Node) error {
	l, err := c.leading()
	if err != nil {
		return err
	}
	l.mu.Lock()
	err = l.nodes.register(n, c.clock.Now(), c.opts.Retention)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	l.markDirty()
	return nil
}

// Registered implements api.Backend.
func (c *Coordinator) Registered(id string) (api.Node, bool) {
	l, err := c.leading()
	if err != nil {
		return api.Node{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nodes.lookup(id, c.clock.Now(), c.opts.Retention)
}

// Report implements api.Backend: the node's endpoints replace its last
// report, except those of Services its NodeGroup does not define, which
// are refused and named.
func (c *Coordinator) Report(ctx context.Context, n api.Node, eps []api.Endpoint) (api.Position, []string, error) {
	l, err := c.leading()
	if err != nil {
		return api.Position{}, nil, err
	}
	l.mu.Lock()
	_, registered := l.nodes.lookup(n.ID, c.clock.Now(), c.opts.Retention)
	owners := l.owners
	l.mu.Unlock()
	if !registered {
		return api.Position{}, nil, fmt.Errorf("%w: node %s's registration expired", api.ErrUnregistered, n.ID)
	}
	if owners == nil && c.opts.Services != nil {
		if _, err := c.indexServices(ctx, l, nil); err != nil {
			return api.Position{}, nil, fmt.Errorf("read the Services to check the report: %w", err)
		}
		l.mu.Lock()
		owners = l.owners
		l.mu.Unlock()
	}
	var refused []string
	out := make([]Endpoint, 0, len(eps))
	for _, e := range eps {
		id := ServiceID{Namespace: e.Namespace, Name: e.Service}
		if owners != nil {
			if ng, ok := owners[id]; !ok || ng != n.NodeGroup {
				why := fmt.Sprintf("endpoint %s of %s/%s: the Service is not defined by a deployment of NodeGroup %s", e.Addr, e.Namespace, e.Service, n.NodeGroup)
				if ok {
					why += " but of " + ng
				}
				refused = append(refused, why)
				continue
			}
		}
		out = append(out, Endpoint{Service: id, Addr: e.Addr})
	}
	if len(refused) > 0 {
		c.log.Warn("refused endpoints of Services the node's NodeGroup does not define", "peer", n.ID, "peer_nodegroup", n.NodeGroup, "refused", refused)
	}
	l.report(n.ID, out, c.clock.Now())
	return l.position(), refused, nil
}

// Leave implements api.Backend: the node's endpoints and registration go,
// and the snapshot without them is written before it returns.
func (c *Coordinator) Leave(ctx context.Context, n api.Node) (api.Position, error) {
	l, err := c.leading()
	if err != nil {
		return api.Position{}, err
	}
	l.mu.Lock()
	delete(l.reports, n.ID)
	if reg, ok := l.nodes.nodes[n.ID]; ok && reg.node.Addr == n.Addr {
		delete(l.nodes.nodes, n.ID)
	}
	l.obs.markDirty()
	l.mu.Unlock()
	written, err := c.publish(ctx, l, false)
	if err != nil {
		return api.Position{}, err
	}
	c.log.Info("node left: snapshot written without it", "peer", n.ID, "term", written.Term, "generation", written.Generation, "revision", written.Revision)
	return api.Position{Term: written.Term, Generation: written.Generation, Revision: written.Revision}, nil
}
