// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package election_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
)

// Heartbeat pace of the quiet tests: the coordinator's defaults.
const (
	beatPeriod = 2 * time.Second
	beatLoss   = election.RenewInterval
)

// heartbeats models a leader's heartbeats over its links to the
// followers: while on, the agent that leads at that instant beats every
// beatPeriod as long as it is not behind on its renewals (its last
// successful write was sent less than RenewInterval + RetryInterval
// ago), and a follower may leave the lease unread until beatLoss
// after the last beat of the leader it observes.
type heartbeats struct {
	c    *cluster
	mu   sync.Mutex
	on   bool
	from string
	last time.Time
}

func withHeartbeats(c *cluster) *heartbeats {
	h := &heartbeats{c: c, on: true}
	c.mu.Lock()
	c.quiet, c.step = h.quiet, h.beat
	c.mu.Unlock()
	return h
}

func (h *heartbeats) beat() {
	l := h.c.leaders()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.on || len(l) != 1 {
		return
	}
	now, id := h.c.clock.Now(), fmt.Sprintf("node-%d", l[0])
	renewed := h.c.agents[l[0]].ValidUntil().Add(-election.Hold)
	if !now.Before(renewed.Add(election.RenewInterval + election.RetryInterval)) {
		return
	}
	if id != h.from || now.Sub(h.last) >= beatPeriod {
		h.from, h.last = id, now
	}
}

func (h *heartbeats) stop() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.on = false
	return h.last
}

func (h *heartbeats) quiet(i int) time.Duration {
	rec, ok := h.c.agents[i].Leader()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !ok || rec.LeaderID != h.from || h.last.IsZero() {
		return 0
	}
	return max(0, h.last.Add(beatLoss).Sub(h.c.clock.Now()))
}

// leaseReads is how many times each agent asked for the lease.
func (c *cluster) leaseReads() []int {
	out := make([]int, len(c.stores))
	for i, s := range c.stores {
		out[i] = s.Counts().Get
	}
	return out
}

// firstReadAfter is when agent first read the lease after t.
func (c *cluster) firstReadAfter(agent int, t time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.seen {
		if s.agent == agent && s.at.After(t) {
			return s.at
		}
	}
	return time.Time{}
}

// While the leader's heartbeats arrive, followers make no lease request
// for a simulated minute; the leader keeps renewing.
func TestQuietFollowersReadNoLease(t *testing.T) {
	c := newCluster(t, 3, 21, nil)
	withHeartbeats(c)
	l := c.waitLeader(time.Second)
	c.run(10*time.Second, 100*time.Millisecond)
	before := c.leaseReads()
	renewals := c.stores[l].Counts().PutIfMatch
	c.run(time.Minute, 100*time.Millisecond)
	after := c.leaseReads()
	for i := range after {
		if i != l && after[i] != before[i] {
			t.Errorf("node-%d read the lease %d times in a minute of heartbeats, want 0", i, after[i]-before[i])
		}
	}
	if got := c.leaders(); len(got) != 1 || got[0] != l {
		t.Fatalf("leaders = %v, want [%d]", got, l)
	}
	if n := c.stores[l].Counts().PutIfMatch - renewals; n < 11 || n > 13 {
		t.Errorf("the leader renewed %d times in the minute, want 12", n)
	}
}

// When heartbeats stop while the leader is healthy, every follower reads
// the lease again within the loss bound, and none takes over: the
// renewals it sees move the lease.
func TestQuietFollowersResumeWhenHeartbeatsStop(t *testing.T) {
	c := newCluster(t, 3, 22, nil)
	h := withHeartbeats(c)
	l := c.waitLeader(time.Second)
	c.run(20*time.Second, 100*time.Millisecond)
	last := h.stop()
	c.run(40*time.Second, 100*time.Millisecond)
	for i := range c.agents {
		if i == l {
			continue
		}
		first := c.firstReadAfter(i, last)
		if first.IsZero() || first.Sub(last) > beatLoss+100*time.Millisecond {
			t.Errorf("node-%d read the lease %s after the last heartbeat, want within %s", i, first.Sub(last), beatLoss)
		}
	}
	if got := c.leaders(); len(got) != 1 || got[0] != l {
		t.Fatalf("leaders = %v, want [%d]: a healthy leader was taken over", got, l)
	}
}

// A leader cut off from the bucket beats until a renewal is overdue, then
// stops, as the coordinator's does. A follower takes over within
// Timeout + RenewInterval + RetryInterval + the loss bound after the last
// renewal, and only after Timeout of its own observation since it resumed
// reading.
func TestQuietFollowerTakesOverAfterItsOwnTimeout(t *testing.T) {
	c := newCluster(t, 5, 23, nil)
	for _, s := range c.stores {
		s.SetRules(faultstore.Rule{Action: faultstore.Delay, Latency: 3 * time.Millisecond})
	}
	h := withHeartbeats(c)
	old := c.waitLeader(time.Second)
	c.run(27*time.Second, 10*time.Millisecond)
	lastRenewal := c.agents[old].ValidUntil().Add(-election.Hold)
	next := c.partition(old, 50*time.Second)
	lastBeat := h.stop()
	if overdue := lastRenewal.Add(election.RenewInterval + election.RetryInterval); lastBeat.After(overdue) {
		t.Errorf("the test's leader beat at %s, after its renewal was overdue at %s", lastBeat, overdue)
	}
	term, _ := c.agents[next].Term()
	failover := term.Since.Sub(lastRenewal)
	bound := election.Timeout + election.RenewInterval + election.RetryInterval + beatLoss + 40*time.Millisecond
	t.Logf("failover %s after the last renewal (bound %s)", failover, bound)
	if failover <= election.Timeout || failover > bound {
		t.Errorf("failover took %s, want more than %s and at most %s", failover, election.Timeout, bound)
	}
	resumed := c.firstReadAfter(next, lastBeat)
	if resumed.IsZero() || term.Since.Sub(resumed) <= election.Timeout {
		t.Errorf("node-%d took over %s after it resumed reading the lease, want more than %s", next, term.Since.Sub(resumed), election.Timeout)
	}
}

// A quiet spell hides the lease's history: a follower that saw a version,
// went quiet for longer than Timeout and then finds the same version must
// still watch it for Timeout before taking over.
func TestQuietSpellRestartsTheTimeout(t *testing.T) {
	c := newCluster(t, 2, 24, nil)
	old := c.waitLeader(time.Second)
	follower := 1 - old
	c.run(6*time.Second, 100*time.Millisecond)
	// The leader freezes (no renewal) and the follower reads its last
	// version; then a voucher that is wrong tells the follower to stay
	// quiet for 30 s, twice Timeout.
	c.stores[old].SetRules(faultstore.Rule{Action: faultstore.Fail})
	c.run(6*time.Second, 100*time.Millisecond)
	obj, err := c.bucket.Get(t.Context(), election.Key, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, etag := c.firstSeen(follower, c.clock.Now()); etag != obj.ETag {
		t.Fatalf("the follower last read %s, want the frozen lease %s", etag, obj.ETag)
	}
	seen := c.leaseReads()[follower]
	quietUntil := c.clock.Now().Add(30 * time.Second)
	c.mu.Lock()
	c.quiet = func(i int) time.Duration {
		if i != follower {
			return 0
		}
		return max(0, quietUntil.Sub(c.clock.Now()))
	}
	c.mu.Unlock()
	c.run(30*time.Second, 100*time.Millisecond)
	if n := c.leaseReads()[follower] - seen; n > 1 {
		t.Fatalf("the quiet follower read the lease %d times", n)
	}
	for range 3000 {
		c.run(10*time.Millisecond, 10*time.Millisecond)
		if l := c.leaders(); len(l) == 1 && l[0] == follower {
			break
		}
	}
	term, leads := c.agents[follower].Term()
	if !leads {
		t.Fatal("the follower never took over")
	}
	if waited := term.Since.Sub(quietUntil); waited <= election.Timeout {
		t.Errorf("the follower took over %s after its quiet spell ended, want more than %s", waited, election.Timeout)
	}
}

// Quiet followers under faults and rolling partitions: at most one agent
// ever leads.
func TestAtMostOneLeaderWithQuietFollowers(t *testing.T) {
	for _, seed := range []uint64{31, 32} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			c := newCluster(t, 5, seed*100, nil)
			withHeartbeats(c)
			faultRounds(t, c, 8)
		})
	}
}
