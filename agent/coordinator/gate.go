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
// the leader has written the snapshot without them before it answers, so
// the dataplane sends the Pod no new flows before it is replaced. A
// refused one is retried at the next reconcile pass (or when the leader
// hints that a slot freed). Without an answering leader the node falls
// back to its leaderless delay.
func (c *Coordinator) Admit(ctx context.Context, u staticpod.Update) (bool, string) {
	var svc *ServiceID
	if u.Service != nil {
		svc = &ServiceID{Namespace: u.Service.Namespace, Name: u.Service.Name}
	}
	c.node.sendMu.Lock()
	defer c.node.sendMu.Unlock()
	c.mu.Lock()
	remaining := withoutService(c.local, svc)
	c.mu.Unlock()
	name := u.Deployment.Name
	if l, err := c.leading(); err == nil {
		granted, reason, err := c.decideSlot(ctx, l, c.self(), name, u.To)
		if err != nil {
			return c.leaderless(u, svc, err.Error())
		}
		if !granted {
			c.answered(u)
			return false, reason
		}
		c.withdraw(u, svc, remaining)
		if _, err := c.publish(ctx, l, false); err != nil {
			c.log.Warn("the snapshot without the endpoints of the Pod to be replaced was not written: replacing it anyway", "deployment", u.Deployment.String(), "err", err)
		}
		return true, ""
	}
	rec, ok := c.elector.Leader()
	if !ok {
		return c.leaderless(u, svc, "no leader is known")
	}
	cl, err := api.Dial(rec.LeaderAddr, rec.LeaderID, c.opts.Identity, c.opts.Dial)
	if err != nil {
		return c.leaderless(u, svc, err.Error())
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, election.RequestTimeout)
	defer cancel()
	resp, err := cl.AcquireSlot(rctx, &pb.SlotRequest{Deployment: name, Revision: u.To, Endpoints: reportedEndpoints(remaining)})
	switch status.Code(err) {
	case codes.OK:
	case codes.FailedPrecondition, codes.PermissionDenied, codes.InvalidArgument:
		// The leader answers but will not decide (this node sent no
		// Hello to it yet, say): ask again at the next pass.
		c.answered(u)
		c.poke()
		return false, fmt.Sprintf("the leader %s did not decide: %v", rec.LeaderID, status.Convert(err).Message())
	default:
		return c.leaderless(u, svc, fmt.Sprintf("leader %s: %v", rec.LeaderID, err))
	}
	if !resp.GetGranted() {
		c.answered(u)
		return false, resp.GetReason()
	}
	c.withdraw(u, svc, remaining)
	c.log.Info("rollout slot granted: the Pod's endpoints are withdrawn and the leader wrote the snapshot without them", "deployment", u.Deployment.String(),
		"revision", short(u.To), "term", resp.GetTerm(), "generation", resp.GetGeneration(), "snapshot_revision", resp.GetSnapshotRevision())
	return true, ""
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
