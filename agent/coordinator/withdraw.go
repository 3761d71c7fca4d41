// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"cmp"
	"context"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator/election"
)

// A rollout slot's Pod stops only after every live node applied the
// snapshot written without its endpoints: each node tells the leader
// which snapshot its Service DNS and dataplane hold (Applied, then
// ConfirmApplied over the API), and the leader answers a slot's holder
// whether every live node holds the withdrawal yet. A node that never
// confirms is waited for at most one lease window (Retention) after the
// withdrawal was written: by then its registration has lapsed unless it
// keeps reporting, and a node that keeps reporting but cannot program
// its dataplane must not hold every rollout back for ever.

// positionOf is the position of a snapshot.
func positionOf(s *pb.ServiceSnapshot) api.Position {
	return api.Position{Term: s.GetTerm(), Generation: s.GetGeneration(), Revision: s.GetRevision()}
}

// before reports whether a is an earlier write than b: a lower term,
// within one term a lower generation, within one generation a lower
// revision.
func before(a, b api.Position) bool {
	return cmp.Or(cmp.Compare(a.Term, b.Term), cmp.Compare(a.Generation, b.Generation), cmp.Compare(a.Revision, b.Revision)) < 0
}

// Applied tells the coordinator that this node's Service DNS and
// dataplane hold v, a view OnView handed over. With
// Options.AppliedByCaller the OnView receiver calls it once they do;
// otherwise a view counts as applied when OnView returns.
func (c *Coordinator) Applied(v *pb.ServiceSnapshot) {
	if v == nil {
		return
	}
	at := positionOf(v)
	c.mu.Lock()
	c.node.applied, c.node.appliedSet = at, true
	l := c.leader
	c.mu.Unlock()
	if l != nil {
		l.mu.Lock()
		l.applied[c.opts.NodeID], l.appliedAt[c.opts.NodeID] = at, c.clock.Now()
		l.mu.Unlock()
		c.checkWithdrawals(l)
	}
	select {
	case c.confirmKick <- struct{}{}:
	default:
	}
}

// sendApplied confirms to the leader of s the snapshot this node holds,
// when it has not yet.
func (c *Coordinator) sendApplied(ctx context.Context, s *leaderLink) {
	c.mu.Lock()
	at, ok := c.node.applied, c.node.appliedSet
	c.mu.Unlock()
	if !ok || !s.hello || s.confirmed == at {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, election.RequestTimeout)
	defer cancel()
	_, err := s.client.ConfirmApplied(rctx, &pb.AppliedRequest{Term: at.Term, Generation: at.Generation, Revision: at.Revision})
	switch status.Code(err) {
	case codes.OK:
		s.confirmed = at
	case codes.Unimplemented:
		// A leader of an earlier version: it paces rollouts without
		// confirmations; asking again would only repeat the error.
		s.confirmed = at
	case codes.FailedPrecondition:
		s.hello = false // the leader forgot this node: Hello again
	default:
		if ctx.Err() == nil {
			c.log.Warn("confirming the applied snapshot to the leader failed: retrying at the next sync", "leader", s.leader.LeaderID, "err", err)
		}
	}
}

// ConfirmApplied implements api.RolloutBackend.
func (c *Coordinator) ConfirmApplied(_ context.Context, n api.Node, at api.Position) error {
	l, err := c.leading()
	if err != nil {
		return err
	}
	now := c.clock.Now()
	l.mu.Lock()
	l.applied[n.ID], l.appliedAt[n.ID] = at, now
	l.nodes.heard(n.ID, now)
	l.mu.Unlock()
	c.checkWithdrawals(l)
	return nil
}

// nodeEndpoints is the set of endpoint addresses of node in s.
func nodeEndpoints(s *pb.ServiceSnapshot, node string) map[string]bool {
	out := map[string]bool{}
	for _, svc := range s.GetServices() {
		for _, e := range svc.GetEndpoints() {
			if e.GetNodeId() == node {
				out[svc.GetNamespace()+"/"+svc.GetName()+"/"+e.GetAddress()] = true
			}
		}
	}
	return out
}

// grantWithdraw replaces the endpoints of the holder of the slot sk with
// eps (those of the Pod to be replaced withdrawn), writes the snapshot,
// and records on the grant the snapshot that withdrew them: the first
// one written for the grant, or a later one that withdrew endpoints again
// (the holder's agent restarted and reported them once more before it
// asked again).
func (c *Coordinator) grantWithdraw(ctx context.Context, l *leaderState, sk slotKey, eps []Endpoint) (*pb.ServiceSnapshot, error) {
	l.mu.Lock()
	had := nodeEndpoints(l.snap, sk.node)
	l.mu.Unlock()
	// Taken before the write: a node may confirm the new snapshot before
	// this call records it.
	now := c.clock.Now()
	l.report(sk.node, eps, now)
	written, err := c.publish(ctx, l, false)
	if err != nil {
		return nil, err
	}
	kept := nodeEndpoints(written, sk.node)
	removed := false
	for e := range had {
		if !kept[e] {
			removed = true
		}
	}
	l.mu.Lock()
	if g, ok := l.ro.grants[sk]; ok && (g.withdrawnAt.IsZero() || removed) {
		g.withdrawn, g.withdrawnAt, g.confirmed = positionOf(written), now, false
		l.ro.grants[sk] = g
	}
	l.mu.Unlock()
	c.checkWithdrawals(l)
	return written, nil
}

// unconfirmed lists, sorted, the live nodes that have not confirmed a
// snapshot at or after at. Called with l.mu held.
func (l *leaderState) unconfirmed(at api.Position, now time.Time, retention time.Duration) []string {
	var out []string
	for id, reg := range l.nodes.nodes {
		if now.Sub(reg.seen) > retention {
			continue // its lease lapsed: gone
		}
		if a, ok := l.applied[id]; ok && !before(a, at) {
			continue
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// withdrawal returns whether every live node applied the withdrawal of
// the slot sk (or the wait for them ended) and, until then, the nodes
// that have not. Called with l.mu held; it records a confirmation.
func (c *Coordinator) withdrawal(l *leaderState, sk slotKey, now time.Time) (confirmed bool, waiting []string) {
	g, ok := l.ro.grants[sk]
	if !ok || g.withdrawnAt.IsZero() {
		return false, nil
	}
	if g.confirmed {
		return true, nil
	}
	waiting = l.unconfirmed(g.withdrawn, now, c.opts.Retention)
	late := now.Sub(g.withdrawnAt) >= c.opts.Retention
	if len(waiting) > 0 && !late {
		return false, waiting
	}
	if len(waiting) > 0 {
		c.log.Warn("rollout slot: not every live node confirmed the snapshot without the Pod's endpoints within the lease window: taking them as gone",
			"peer", sk.node, "deployment", g.nodegroup+"/"+sk.deployment, "unconfirmed", waiting, "waited", c.opts.Retention)
	} else {
		// When each node confirmed, after the withdrawal was written:
		// how long the slowest dataplane kept the old Pod a backend.
		var took []string
		for _, id := range slices.Sorted(maps.Keys(l.nodes.nodes)) {
			if at, ok := l.appliedAt[id]; ok {
				took = append(took, id+"="+at.Sub(g.withdrawnAt).String())
			}
		}
		c.log.Info("rollout slot: every live node applied the snapshot without the Pod's endpoints", "peer", sk.node,
			"deployment", g.nodegroup+"/"+sk.deployment, "after", now.Sub(g.withdrawnAt).String(), "applied_after", strings.Join(took, " "))
	}
	g.confirmed = true
	l.ro.grants[sk] = g
	return true, nil
}

// checkWithdrawals confirms every slot whose withdrawal every live node
// applied (or whose wait ended) and tells its holder to go on: a hint to
// a follower, a reconcile pass for this node.
func (c *Coordinator) checkWithdrawals(l *leaderState) {
	now := c.clock.Now()
	var done []string
	l.mu.Lock()
	for sk, g := range l.ro.grants {
		if g.confirmed || g.withdrawnAt.IsZero() {
			continue
		}
		if ok, _ := c.withdrawal(l, sk, now); ok {
			done = append(done, sk.node)
		}
	}
	l.mu.Unlock()
	for _, node := range done {
		if node == c.opts.NodeID {
			c.slotFreed()
			continue
		}
		c.server.Broadcast(&pb.Hint{Kind: pb.Hint_WITHDRAWN, NodeId: node})
	}
}

// slotFreed asks this node's reconcile loop for a pass now.
func (c *Coordinator) slotFreed() {
	if c.opts.OnSlotFreed != nil {
		c.opts.OnSlotFreed()
	}
}

// seedSnapshot is the snapshot whose backends the nodes serve now, which
// a new leadership keeps until their nodes report otherwise (or their
// leases lapse), so that a failover or a restart of the leader's agent
// never publishes a snapshot without live, ready endpoints: the stored
// snapshot (dns/services.pb) when this node's view of the last leadership
// is current and not newer than it, or when this agent takes over the
// lease an earlier run of it renewed within the lease window (the record
// was written by this machine's clock, so the age is its own to judge);
// otherwise this node's current view, or nil when it has none (a cold
// start: nothing is served).
func (c *Coordinator) seedSnapshot(stored *pb.ServiceSnapshot, term election.Term, now time.Time) *pb.ServiceSnapshot {
	if !c.cache.Expired(now) {
		if cur, _ := c.cache.Snapshot(); stored != nil && !newer(cur, stored) {
			return stored
		}
		return c.cache.View(now)
	}
	took := term.Took
	own := took.LeaderID == c.opts.NodeID && took.LeaderAddr == c.opts.Advertise.String()
	if stored == nil || !own || stored.GetLeaderId() != c.opts.NodeID || stored.GetTerm() != took.Term {
		return nil
	}
	if age := now.Sub(took.LastUpdated); age < 0 || age > c.opts.Retention {
		return nil
	}
	return stored
}

// seed installs the endpoints of s as reported at now, except this
// node's own once its endpoints are known. Called before the leadership
// runs.
func (c *Coordinator) seed(l *leaderState, s *pb.ServiceSnapshot, now time.Time, ownKnown bool) {
	for _, svc := range s.GetServices() {
		for _, e := range svc.GetEndpoints() {
			addr, err := netip.ParseAddr(e.GetAddress())
			if err != nil || e.GetNodeId() == "" || e.GetNodeId() == c.opts.NodeID && ownKnown {
				continue
			}
			r := l.reports[e.GetNodeId()]
			r.eps, r.at = append(r.eps, Endpoint{Service: ServiceID{Namespace: svc.GetNamespace(), Name: svc.GetName()}, Addr: addr}), now
			l.reports[e.GetNodeId()] = r
		}
	}
}
