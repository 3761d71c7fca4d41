// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"podmin.dev/podmin/agent/staticpod"
)

// DefaultDrain is how long a node keeps a Pod whose endpoints a rollout
// slot withdrew after every live node applied the snapshot without them:
// the connections it already has may finish their requests. Then the
// Pod's file is replaced and kubelet stops it, within the Pod's
// terminationGracePeriodSeconds.
const DefaultDrain = 5 * time.Second

// slotWait is a rollout slot this node holds and has not used yet: the
// Pod's file is replaced once every live node applied the snapshot
// without the Pod's endpoints (confirmed) and the drain after it ended.
type slotWait struct {
	revision string
	// retire names the old Pod a retirement stops (retireKey), "" for a
	// replacement; asked is set once the leader was asked for it.
	retire string
	asked  bool
	// drains is false when the Pod served nothing through its Service
	// (it had no endpoints to withdraw): then nothing is waited for.
	drains bool
	// granted and confirmed are when this node got the slot and learnt
	// the withdrawal was confirmed (zero until then), on its own clock.
	granted, confirmed time.Time
}

// slotAnswer is what this node learnt when it asked for a slot.
type slotAnswer struct {
	granted, confirmed bool
	// unconfirmed are the live nodes that have not applied the
	// withdrawal yet; reason says why a slot was refused.
	unconfirmed []string
	reason      string
	// noLeader, when set, says why no leader answered.
	noLeader string
}

// waitFor decides on a slot the node holds (w) after the leader's answer
// a: the Pod is replaced only after the withdrawal is confirmed and the
// drain ended. The confirmation is waited for at most Retention after the
// grant, on this node's own clock, so a node whose leader is gone or
// never answers still goes on.
func (c *Coordinator) waitFor(u staticpod.Update, w *slotWait, a slotAnswer) (bool, string) {
	now := c.clock.Now()
	if w.confirmed.IsZero() {
		switch {
		case a.confirmed:
			w.confirmed = now
			c.log.Info("every live node applied the snapshot without the Pod's endpoints: draining the Pod", "deployment", u.Deployment.String(),
				"revision", short(u.To), "drain", c.drain().String())
		case now.Sub(w.granted) >= c.opts.Retention:
			c.log.Warn("rollout slot: the withdrawal of the Pod's endpoints was not confirmed within the lease window: going on",
				"deployment", u.Deployment.String(), "revision", short(u.To), "unconfirmed", a.unconfirmed, "no_leader", a.noLeader)
			w.confirmed = now
		default:
			next := now.Add(c.timing.Retry)
			if bound := w.granted.Add(c.opts.Retention); bound.Before(next) {
				next = bound
			}
			c.askAgain(next)
			if a.noLeader != "" {
				return false, fmt.Sprintf("rollout slot granted; no leader confirms that every live node applied the snapshot without this Pod's endpoints (%s): going on at %s at the latest",
					a.noLeader, w.granted.Add(c.opts.Retention).UTC().Format(time.RFC3339))
			}
			return false, "rollout slot granted: waiting until every live node applied the snapshot without this Pod's endpoints (not yet: " +
				strings.Join(a.unconfirmed, ", ") + ")"
		}
	}
	end := w.confirmed.Add(c.drain())
	if now.Before(end) {
		c.askAgain(end)
		return false, fmt.Sprintf("draining: no node sends this Pod new connections; the ones it has may finish until %s (drain %s)",
			end.UTC().Format(time.RFC3339), c.drain())
	}
	c.mu.Lock()
	delete(c.node.waits, u.Deployment.Name)
	c.mu.Unlock()
	what := "drained: replacing the Pod"
	if w.retire != "" {
		what = "drained: the old Pod goes, the new one serves"
	}
	c.log.Info(what, "deployment", u.Deployment.String(), "revision", short(u.To), "since_granted", now.Sub(w.granted).String())
	return true, ""
}

// drain is the drain period; none when Options.Drain is negative.
func (c *Coordinator) drain() time.Duration { return max(c.opts.Drain, 0) }

// askAgain makes the reconcile loop ask the Gate again at at (or
// earlier, when an earlier ask is due).
func (c *Coordinator) askAgain(at time.Time) {
	c.mu.Lock()
	// An ask that is due has fired (or is firing): it no longer stands in
	// the way of a later one.
	if due := c.node.askAt; !due.IsZero() && due.After(c.clock.Now()) && !at.Before(due) {
		c.mu.Unlock()
		return
	}
	c.node.askAt = at
	c.mu.Unlock()
	select {
	case c.gateKick <- struct{}{}:
	default:
	}
}

// askAgainLoop runs a reconcile pass (OnSlotFreed) when the earliest
// ask the Gate wants is due, until ctx ends.
func (c *Coordinator) askAgainLoop(ctx context.Context) {
	for {
		c.mu.Lock()
		at := c.node.askAt
		c.mu.Unlock()
		var fire <-chan time.Time
		if !at.IsZero() {
			fire = c.clock.After(at.Sub(c.clock.Now()))
		}
		select {
		case <-ctx.Done():
			return
		case <-c.gateKick:
		case <-fire:
			c.mu.Lock()
			if c.node.askAt.Equal(at) {
				c.node.askAt = time.Time{}
			}
			c.mu.Unlock()
			c.slotFreed()
		}
	}
}
