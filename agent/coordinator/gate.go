// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/agent/staticpod"
)

// Leaderless fallback: a node that finds no leader to ask for a rollout
// slot for LeaderlessAfter (longer than a failover, 20 s plus a request)
// applies the update anyway, after a further LeaderlessStep times its
// position among its NodeGroup's nodes (sorted by node ID, as the last
// Service snapshot registered them). The delays are deterministic and
// distinct, so a leaderless NodeGroup never replaces all its Pods at
// once; a Pod update takes about 15 s on a real node, well inside a step.
const (
	LeaderlessAfter = time.Minute
	LeaderlessStep  = 30 * time.Second
)

var _ staticpod.Gate = (*Coordinator)(nil)

// Admit implements staticpod.Gate: before this node replaces its running
// Pod of a deployment with a new revision, it asks the leader for a
// rollout slot. A granted slot comes with the Pod's endpoints withdrawn:
// the leader has written the snapshot without them before it answers.
// The Pod is replaced only once every live node has applied that
// snapshot (the leader says so when asked again, and hints the node when
// it is so; at most Retention after the grant) and the drain that
// follows has ended, so no node sends the Pod a new connection before it
// stops and the ones it has may finish. A refused slot is asked for again
// at the next reconcile pass (or when the leader hints that a slot
// freed); a node whose kubelet has not listed its Pods yet does not ask,
// since it cannot tell which endpoints the update withdraws. Without an
// answering leader the node falls back to its leaderless delay.
//
// Under maxSurge the node asks for a surge slot instead (admitSurge) and
// lets the old Pod go once the new one is ready (admitRetire, surge.go).
func (c *Coordinator) Admit(ctx context.Context, u staticpod.Update) (bool, string) {
	switch u.Kind {
	case staticpod.Surge:
		return c.admitSurge(ctx, u)
	case staticpod.Retire:
		return c.admitRetire(ctx, u)
	}
	var svc *ServiceID
	if u.Service != nil {
		svc = &ServiceID{Namespace: u.Service.Namespace, Name: u.Service.Name}
	}
	c.node.sendMu.Lock()
	defer c.node.sendMu.Unlock()
	name := u.Deployment.Name
	c.mu.Lock()
	w := c.node.waits[name]
	if w != nil && (w.revision != u.To || w.retire != "") {
		delete(c.node.waits, name) // superseded by a later commit
		w = nil
	}
	known := c.localKnown()
	remaining := withoutService(c.local, svc)
	serving := len(remaining) < len(c.local)
	c.mu.Unlock()
	if w != nil && !w.confirmed.IsZero() {
		return c.waitFor(u, w, slotAnswer{})
	}
	if w == nil && !known {
		c.askAgain(c.clock.Now().Add(c.timing.Retry))
		return false, "kubelet's Pods API has not listed this node's Pods yet: the node asks for a rollout slot once it knows which endpoints the update withdraws"
	}
	a := c.askSlot(ctx, u, remaining, w == nil, pb.SlotKind_SLOT_REPLACE)
	if a.noLeader != "" {
		if w != nil {
			return c.waitFor(u, w, a)
		}
		return c.leaderless(u, svc, a.noLeader)
	}
	if !a.granted {
		c.answered(u)
		if w != nil {
			// A leader that does not know this node's slot yet (it has
			// not read the node's report): the grant stands.
			return c.waitFor(u, w, slotAnswer{noLeader: a.reason})
		}
		return false, a.reason
	}
	if w == nil {
		w = &slotWait{revision: u.To, drains: serving, granted: c.clock.Now()}
		c.mu.Lock()
		c.node.waits[name] = w
		c.mu.Unlock()
	}
	if !w.drains {
		c.mu.Lock()
		delete(c.node.waits, name)
		c.mu.Unlock()
		return true, ""
	}
	return c.waitFor(u, w, a)
}

// askSlot asks the leader for the slot of kind for u (this node when it
// leads), sending the endpoints the node keeps. A granted slot is
// recorded (grantedSlot) before the leader writes the snapshot without
// the Pod's endpoints, so no report of the endpoints from before
// overtakes it; a surge slot withdraws nothing and writes nothing. first
// says whether this node asks for the first time (and logs a grant).
// Called with sendMu held.
func (c *Coordinator) askSlot(ctx context.Context, u staticpod.Update, remaining []Endpoint, first bool, kind pb.SlotKind) slotAnswer {
	var svc *ServiceID
	if u.Service != nil {
		svc = &ServiceID{Namespace: u.Service.Namespace, Name: u.Service.Name}
	}
	name := u.Deployment.Name
	if l, err := c.leading(); err == nil {
		granted, reason, err := c.decideSlot(ctx, l, c.self(), name, u.To, kind)
		if err != nil {
			return slotAnswer{noLeader: err.Error()}
		}
		if !granted {
			return slotAnswer{reason: reason}
		}
		c.grantedSlot(u, svc, remaining, kind)
		if kind == pb.SlotKind_SLOT_SURGE {
			return slotAnswer{granted: true, confirmed: true}
		}
		sk := slotKey{node: c.opts.NodeID, deployment: name}
		if _, err := c.grantWithdraw(ctx, l, sk, remaining); err != nil {
			c.log.Warn("the snapshot without the endpoints of the Pod to be replaced was not written: asking again", "deployment", u.Deployment.String(), "err", err)
			c.askAgain(c.clock.Now().Add(c.timing.Retry))
			return slotAnswer{granted: true, unconfirmed: []string{c.opts.NodeID + " (its snapshot is not written)"}}
		}
		l.mu.Lock()
		confirmed, waiting := c.withdrawal(l, sk, c.clock.Now())
		l.mu.Unlock()
		return slotAnswer{granted: true, confirmed: confirmed, unconfirmed: waiting}
	}
	rec, ok := c.elector.Leader()
	if !ok {
		return slotAnswer{noLeader: "no leader is known"}
	}
	cl, err := api.Dial(rec.LeaderAddr, rec.LeaderID, c.opts.Identity, c.opts.Dial)
	if err != nil {
		return slotAnswer{noLeader: err.Error()}
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, election.RequestTimeout)
	defer cancel()
	resp, err := cl.AcquireSlot(rctx, &pb.SlotRequest{Deployment: name, Revision: u.To, Endpoints: reportedEndpoints(remaining), Kind: kind})
	switch status.Code(err) {
	case codes.OK:
	case codes.FailedPrecondition, codes.PermissionDenied, codes.InvalidArgument:
		// The leader answers but will not decide (this node sent no
		// Hello to it yet, say): ask again at the next pass.
		c.poke()
		c.askAgain(c.clock.Now().Add(c.timing.Retry))
		return slotAnswer{reason: fmt.Sprintf("the leader %s did not decide: %v", rec.LeaderID, status.Convert(err).Message())}
	default:
		return slotAnswer{noLeader: fmt.Sprintf("leader %s: %v", rec.LeaderID, err)}
	}
	if !resp.GetGranted() {
		return slotAnswer{reason: resp.GetReason()}
	}
	c.grantedSlot(u, svc, remaining, kind)
	switch {
	case kind == pb.SlotKind_SLOT_SURGE:
		if first {
			c.log.Info("surge slot granted: the new revision starts beside the running Pod", "deployment", u.Deployment.String(), "revision", short(u.To))
		}
		return slotAnswer{granted: true, confirmed: true}
	case first:
		c.log.Info("rollout slot granted: the Pod's endpoints are withdrawn and the leader wrote the snapshot without them", "deployment", u.Deployment.String(),
			"kind", kind.String(), "revision", short(u.To), "term", resp.GetTerm(), "generation", resp.GetGeneration(), "snapshot_revision", resp.GetSnapshotRevision())
	}
	// A leader that has not confirmed the withdrawal names the nodes it
	// waits for; one that names none is of an earlier version, which
	// tracks no confirmations: its written snapshot is all it vouches for,
	// as before, and the drain follows.
	confirmed := resp.GetConfirmed() || len(resp.GetUnconfirmed()) == 0
	return slotAnswer{granted: true, confirmed: confirmed, unconfirmed: resp.GetUnconfirmed()}
}

// grantedSlot records a granted slot of kind: for a replacement the
// Service's endpoints on this node stay out until a Pod of the new
// revision is ready (withdraw); a surge slot is held until the new
// revision is applied; a retirement left its old Pod's endpoints out
// before it asked (admitRetire).
func (c *Coordinator) grantedSlot(u staticpod.Update, svc *ServiceID, remaining []Endpoint, kind pb.SlotKind) {
	switch kind {
	case pb.SlotKind_SLOT_REPLACE:
		c.withdraw(u, svc, remaining)
	case pb.SlotKind_SLOT_SURGE:
		c.mu.Lock()
		c.node.granted[u.Deployment.Name] = u.To
		delete(c.node.leaderless, u.Deployment.Name+"@"+u.To)
		c.mu.Unlock()
		c.statusChanged()
	}
}

// withdraw records a granted slot: the Service's endpoints on this node
// stay out until a Pod of the new revision is ready.
func (c *Coordinator) withdraw(u staticpod.Update, svc *ServiceID, remaining []Endpoint) {
	c.mu.Lock()
	if svc != nil {
		c.node.withdrawn[*svc] = u.To
	}
	c.node.granted[u.Deployment.Name] = u.To
	delete(c.node.leaderless, u.Deployment.Name+"@"+u.To)
	if !c.draining {
		c.local = remaining
	}
	c.mu.Unlock()
	c.statusChanged()
}

// answered forgets the leaderless wait of an update a leader decided on.
func (c *Coordinator) answered(u staticpod.Update) {
	c.mu.Lock()
	delete(c.node.leaderless, u.Deployment.Name+"@"+u.To)
	c.mu.Unlock()
}

// leaderless is the fallback without an answering leader: the update
// waits LeaderlessAfter plus this node's position times LeaderlessStep
// from when it first found no leader, then goes ahead.
func (c *Coordinator) leaderless(u staticpod.Update, svc *ServiceID, why string) (bool, string) {
	now := c.clock.Now()
	key := u.Deployment.Name + "@" + u.To
	c.mu.Lock()
	since, ok := c.node.leaderless[key]
	if !ok {
		since = now
		c.node.leaderless[key] = now
	}
	remaining := withoutService(c.local, svc)
	c.mu.Unlock()
	pos := c.position()
	at := since.Add(c.opts.LeaderlessAfter + time.Duration(pos)*c.opts.LeaderlessStep)
	if now.Before(at) {
		return false, fmt.Sprintf("no leader answers (%s): without one this node applies the update at %s (position %d of its NodeGroup)",
			why, at.UTC().Format(time.RFC3339), pos)
	}
	c.log.Warn("no leader answers: applying the update after this node's leaderless delay", "deployment", u.Deployment.String(),
		"revision", short(u.To), "position", pos, "waited", now.Sub(since).Round(time.Second).String(), "why", why)
	c.withdraw(u, svc, remaining)
	return true, ""
}

// position is this node's place among its NodeGroup's nodes in the last
// snapshot's registry, sorted by node ID; a node missing from it takes a
// place derived from its node ID.
func (c *Coordinator) position() int {
	snap, _ := c.cache.Snapshot()
	var ids []string
	for _, n := range snap.GetNodes() {
		if n.GetNodegroup() == c.opts.NodeGroup {
			ids = append(ids, n.GetNodeId())
		}
	}
	slices.Sort(ids)
	if i := slices.Index(ids, c.opts.NodeID); i >= 0 {
		return i
	}
	h := fnv.New32a()
	h.Write([]byte(c.opts.NodeID))
	return len(ids) + int(h.Sum32()%16)
}
