// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"
	"sync"
	"time"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
)

// Heartbeats: the leader vouches, over each follower's watch (mTLS, bound
// to the leader's certificate), that it still leads and which index
// version it polled last. While they arrive a follower reads neither the
// lease nor the index; when they stop it reads both at once.
const (
	// SafetyPollPerNode scales a vouched follower's safety poll of the
	// index with the fleet: the poll runs every SafetyPollPerNode times the
	// number of nodes the leader reports, so the whole fleet's safety
	// polls stay at about 30 requests a minute however many nodes there
	// are.
	SafetyPollPerNode = 2 * time.Second
	// MinSafetyPoll and MaxSafetyPoll bound the vouched safety poll.
	MinSafetyPoll = time.Minute
	MaxSafetyPoll = time.Hour
)

// beatPeriod is how often the leader sends a heartbeat: 2 s with the
// default timing.
func (c *Coordinator) beatPeriod() time.Duration { return c.timing.Renew * 2 / 5 }

// beatLoss is how long a follower waits for a heartbeat before it takes
// the leader's word as lost: one renew interval, two and a half beat
// periods.
func (c *Coordinator) beatLoss() time.Duration { return c.timing.Renew }

// beatState is what a follower last heard from its leader's heartbeats,
// and what the leader's own index poll last achieved.
type beatState struct {
	mu   sync.Mutex
	last heardBeat
	// polled is when this node's own index poll last succeeded while it
	// leads.
	polled time.Time
}

// heardBeat is the last heartbeat a follower heard.
type heardBeat struct {
	// at is when it arrived (zero without a live watch); leaderID and
	// term name the leadership that sent it.
	at       time.Time
	leaderID string
	term     uint64
	// etag is the index version it vouched for ("" when the leader's poll
	// does not vouch); nodes the leader's node count.
	etag  string
	nodes int
}

// heartbeat sends a heartbeat to every watching follower each beat
// period while this node leads.
func (c *Coordinator) heartbeat(ctx context.Context) {
	for {
		if h := c.beatHint(); h != nil {
			c.server.Broadcast(h)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.clock.After(c.beatPeriod()):
		}
	}
}

// beatHint is the heartbeat to send now, nil when this node must not
// vouch: it does not lead, or a renewal is overdue (its last successful
// lease write was sent more than Renew + Retry ago), so followers resume
// reading the lease well before the lease could lapse.
func (c *Coordinator) beatHint() *pb.Hint {
	term, leads := c.elector.Term()
	now := c.clock.Now()
	renewed := c.elector.ValidUntil().Add(-c.timing.Hold)
	if !leads || !now.Before(renewed.Add(c.timing.Renew+c.timing.Retry)) {
		return nil
	}
	h := &pb.Hint{Kind: pb.Hint_HEARTBEAT, Term: term.Record.Term, Nodes: uint32(c.server.Watchers() + 1)}
	if v := c.indexSeen.Load(); v != nil && c.indexFresh(now) {
		h.IndexEtag, h.IndexWriteId, h.IndexPolled = v.ETag, v.Meta.WriteID(), true
	}
	return h
}

// indexFresh reports whether this leader's index poll succeeded within
// three poll intervals.
func (c *Coordinator) indexFresh(now time.Time) bool {
	c.beats.mu.Lock()
	defer c.beats.mu.Unlock()
	return !c.beats.polled.IsZero() && now.Sub(c.beats.polled) < 3*c.opts.IndexPoll
}

// indexPolled records a successful index poll of this leader.
func (c *Coordinator) indexPolled(now time.Time) {
	c.beats.mu.Lock()
	c.beats.polled = now
	c.beats.mu.Unlock()
}

// heard records a heartbeat of leader.
func (c *Coordinator) heard(leader string, h *pb.Hint) {
	b := heardBeat{at: c.clock.Now(), leaderID: leader, term: h.GetTerm(), nodes: int(h.GetNodes())}
	if h.GetIndexPolled() {
		b.etag = h.GetIndexEtag()
	}
	c.beats.mu.Lock()
	c.beats.last = b
	c.beats.mu.Unlock()
}

// unheard forgets the heartbeats when a watch ends, and makes the
// election read the lease at once.
func (c *Coordinator) unheard() {
	c.beats.mu.Lock()
	c.beats.last = heardBeat{}
	c.beats.mu.Unlock()
	c.elector.Wake()
}

// vouched returns the heartbeat state while a heartbeat of the leader
// this node observes arrived within the loss bound.
func (c *Coordinator) vouched() (heardBeat, time.Duration, bool) {
	rec, ok := c.elector.Leader()
	c.beats.mu.Lock()
	b := c.beats.last
	c.beats.mu.Unlock()
	if !ok || b.at.IsZero() || b.leaderID != rec.LeaderID || b.term != rec.Term {
		return b, 0, false
	}
	left := b.at.Add(c.beatLoss()).Sub(c.clock.Now())
	return b, left, left > 0
}

// quiet is the election's Options.Quiet: how much longer the leader's
// heartbeats vouch for the lease this node observed.
func (c *Coordinator) quiet() time.Duration {
	_, left, ok := c.vouched()
	if !ok {
		return 0
	}
	return left
}

// SafetyPoll returns how long the reconcile loop may go without reading
// the index itself after a clean pass: while the leader's heartbeats name
// the index version its own poll read (each one is a hint of that version,
// so a lost hint is made up within a beat period), the safety poll only
// guards against a leader's fault, and runs every SafetyPollPerNode times
// the leader's node count, within [MinSafetyPoll, MaxSafetyPoll]. The
// leader itself, polling the index, uses the same interval. Zero means
// not vouched: the loop keeps its own pace.
func (c *Coordinator) SafetyPoll() time.Duration {
	if c.opts.Index == nil {
		return 0
	}
	var nodes int
	if c.elector.IsLeader() {
		if !c.indexFresh(c.clock.Now()) {
			return 0
		}
		nodes = c.server.Watchers() + 1
	} else {
		b, _, ok := c.vouched()
		if !ok || b.etag == "" {
			return 0
		}
		nodes = b.nodes
	}
	return min(MaxSafetyPoll, max(MinSafetyPoll, time.Duration(nodes)*SafetyPollPerNode))
}
