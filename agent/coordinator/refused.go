// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/status"

	"podmin.dev/podmin/agent/api"
	"podmin.dev/podmin/agent/identity"
	"podmin.dev/podmin/internal/state"
)

// A node whose claim the leader refuses (its node ID is another live
// agent's, its address or Pod prefix another node's, its Hello does not
// match its certificate) takes no part in coordination: its Pods'
// endpoints are never served. It says so itself (OnRefused, which the
// agent turns into /readyz), and the leader names it in its NodeGroup's
// status object for one lease window after its last refusal.

// refused records that the leader refused this node's claim.
func (c *Coordinator) refused(leader string, err error) {
	c.refusals.report(c.log, "the leader refused this node's identity: its endpoints are not served", "leader", leader, "err", err)
	reason := fmt.Sprintf("the leader %s refused this node: %s: its Pods' endpoints are not served", leader, status.Convert(err).Message())
	c.mu.Lock()
	changed := c.node.refused != reason
	c.node.refused = reason
	c.mu.Unlock()
	if changed && c.opts.OnRefused != nil {
		c.opts.OnRefused(errors.New(reason))
	}
}

// accepted records that the leader accepted this node's claim.
func (c *Coordinator) accepted() {
	c.refusals.reset()
	c.mu.Lock()
	was := c.node.refused
	c.node.refused = ""
	c.mu.Unlock()
	if was != "" {
		c.log.Info("the leader accepts this node again", "was", was)
		if c.opts.OnRefused != nil {
			c.opts.OnRefused(nil)
		}
	}
}

// Refusal says why the leader refused this node's claim; "" when it did
// not.
func (c *Coordinator) Refusal() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.node.refused
}

// refusal is a node claim this leadership refused.
type refusal struct {
	nodegroup, node, addr, reason string
	// since is the first refusal, at the last one.
	since, at time.Time
}

// Refused implements api.RefusalRecorder: the refused node is named in its
// NodeGroup's status object.
func (c *Coordinator) Refused(peer identity.Peer, reason error) {
	l, err := c.leading()
	if err != nil {
		return
	}
	now := c.clock.Now()
	key := peer.NodeID + "\x00" + peer.Addr.String()
	l.mu.Lock()
	r, ok := l.obs.refused[key]
	if !ok || r.reason != reason.Error() || r.nodegroup != peer.NodeGroup {
		r = refusal{nodegroup: peer.NodeGroup, node: peer.NodeID, addr: peer.Addr.String(), reason: reason.Error(), since: now}
		l.obs.markDirty()
	}
	r.at = now
	l.obs.refused[key] = r
	l.mu.Unlock()
}

// refusedIn lists the refusals of NodeGroup ng heard within retention,
// sorted by node and address, forgetting older ones. Called with l.mu
// held.
func (o *observed) refusedIn(ng string, now time.Time, retention time.Duration) []state.RefusedNode {
	var out []state.RefusedNode
	for key, r := range o.refused {
		if now.Sub(r.at) > retention {
			delete(o.refused, key)
			continue
		}
		if r.nodegroup == ng {
			out = append(out, state.RefusedNode{Node: r.node, Address: r.addr, Reason: r.reason, Since: r.since.UTC()})
		}
	}
	slices.SortFunc(out, func(a, b state.RefusedNode) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Address, b.Address))
	})
	return out
}

var _ api.RefusalRecorder = (*Coordinator)(nil)
