// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package election_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/internal/clock/fakeclock"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
)

// event is one acquisition or loss, in simulated time.
type event struct {
	agent   int
	acquire bool
	at      time.Time
}

// cluster is n agents in one process on one bucket, each behind its own
// fault store, driven by one fake clock.
type cluster struct {
	t      *testing.T
	clock  *fakeclock.Clock
	bucket objstore.Store
	stores []*faultstore.Store
	agents []*election.Elector
	stop   []context.CancelFunc
	done   []chan struct{}
	live   []bool

	mu     sync.Mutex
	events []event
	broken []string // lease-arithmetic violations seen in callbacks
	seen   []sighting
	// quiet, when set, is each agent's Options.Quiet; step, when set,
	// runs at every step of run (a leader's heartbeats, say).
	quiet func(i int) time.Duration
	step  func()
}

// sighting is one lease read by an agent: when (on the shared clock,
// after the response) and which version it saw.
type sighting struct {
	agent int
	at    time.Time
	etag  string
}

// observedStore records an agent's lease reads.
type observedStore struct {
	objstore.Store
	c     *cluster
	agent int
}

func (o observedStore) Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	obj, err := o.Store.Get(ctx, key, opts)
	if err == nil && key == election.Key {
		o.c.mu.Lock()
		o.c.seen = append(o.c.seen, sighting{agent: o.agent, at: o.c.clock.Now(), etag: obj.ETag})
		o.c.mu.Unlock()
	}
	return obj, err
}

// firstSeen is when agent first read the lease version it read last
// before t.
func (c *cluster) firstSeen(agent int, t time.Time) (time.Time, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var etag string
	for _, s := range c.seen {
		if s.agent == agent && s.at.Before(t) {
			etag = s.etag
		}
	}
	for _, s := range c.seen {
		if s.agent == agent && s.etag == etag {
			return s.at, etag
		}
	}
	return time.Time{}, ""
}

func newCluster(t *testing.T, n int, seed uint64, hook func(c *cluster, i int) error) *cluster {
	t.Helper()
	b := local.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := b.CreateBucket(t.Context()); err != nil {
		t.Fatal(err)
	}
	return newClusterOn(t, b, n, seed, hook)
}

// newClusterOn is newCluster on a given bucket.
func newClusterOn(t *testing.T, b objstore.Store, n int, seed uint64, hook func(c *cluster, i int) error) *cluster {
	t.Helper()
	c := &cluster{t: t, clock: fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), bucket: b}
	for i := range n {
		ac := c.clock.For(i)
		fs := faultstore.New(b, faultstore.WithSeed(seed+uint64(i)), faultstore.WithSleep(ac.Sleep))
		e, err := election.New(election.Options{
			ID: fmt.Sprintf("node-%d", i), Addr: fmt.Sprintf("[2001:db8::%d]:8081", i+1),
			Store: observedStore{Store: fs, c: c, agent: i}, Clock: ac,
			Quiet: func() time.Duration {
				c.mu.Lock()
				q := c.quiet
				c.mu.Unlock()
				if q == nil {
					return 0
				}
				return q(i)
			},
			OnAcquire: func(ctx context.Context, term election.Term) error {
				c.acquired(i, term)
				if hook != nil {
					return hook(c, i)
				}
				return nil
			},
			OnLose: func(term election.Term, reason string) {
				c.mu.Lock()
				c.events = append(c.events, event{agent: i, at: c.clock.Now()})
				c.mu.Unlock()
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		c.stores = append(c.stores, fs)
		c.agents = append(c.agents, e)
		c.live = append(c.live, false)
		c.stop = append(c.stop, nil)
		c.done = append(c.done, nil)
	}
	for i := range n {
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range c.agents {
			c.kill(i)
		}
	})
	return c
}

// acquired checks the lease arithmetic when agent i wins: every other
// agent's leadership must have lapsed by the time the winning write was sent.
func (c *cluster) acquired(i int, term election.Term) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for j, other := range c.agents {
		if j != i && other.ValidUntil().After(term.Since) {
			c.broken = append(c.broken, fmt.Sprintf("node-%d acquired at %s while node-%d leads until %s", i, term.Since, j, other.ValidUntil()))
		}
	}
	c.events = append(c.events, event{agent: i, acquire: true, at: term.Since})
}

func (c *cluster) start(i int) {
	ctx, cancel := context.WithCancel(context.Background())
	c.stop[i], c.done[i], c.live[i] = cancel, make(chan struct{}), true
	go func() {
		defer close(c.done[i])
		_ = c.agents[i].Run(ctx)
	}()
}

// kill stops agent i (it resigns if it leads), advancing the clock while
// its resignation waits on injected latency.
func (c *cluster) kill(i int) {
	if !c.live[i] {
		return
	}
	c.live[i] = false
	c.stop[i]()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-c.done[i]:
			c.clock.Forget(i)
			return
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node-%d did not stop", i)
		}
		c.clock.Advance(10 * time.Millisecond)
	}
}

// settle waits until every live agent is blocked on the clock.
func (c *cluster) settle() {
	deadline := time.Now().Add(20 * time.Second)
	for {
		all := true
		for i, live := range c.live {
			if live && !c.clock.Blocked(i) {
				all = false
				break
			}
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatal("agents did not settle on the clock")
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// leaders returns the agents that believe they lead at this instant.
func (c *cluster) leaders() []int {
	var out []int
	for i, e := range c.agents {
		if e.IsLeader() {
			out = append(out, i)
		}
	}
	return out
}

// run advances the clock by total in steps, checking at every step that at
// most one agent leads. It returns the time spent with no leader.
func (c *cluster) run(total, step time.Duration) {
	c.t.Helper()
	for elapsed := time.Duration(0); elapsed < total; elapsed += step {
		c.settle()
		if l := c.leaders(); len(l) > 1 {
			c.t.Fatalf("at %s agents %v all lead", c.clock.Now(), l)
		}
		c.mu.Lock()
		hook := c.step
		c.mu.Unlock()
		if hook != nil {
			hook()
		}
		c.clock.Advance(step)
	}
	c.settle()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.broken {
		c.t.Error(b)
	}
}

// waitLeader runs until exactly one agent leads and returns it.
func (c *cluster) waitLeader(limit time.Duration) int {
	c.t.Helper()
	step := 10 * time.Millisecond
	for elapsed := time.Duration(0); elapsed <= limit; elapsed += step {
		c.settle()
		l := c.leaders()
		if len(l) > 1 {
			c.t.Fatalf("agents %v all lead", l)
		}
		if len(l) == 1 {
			return l[0]
		}
		c.clock.Advance(step)
	}
	c.t.Fatalf("no leader within %s", limit)
	return -1
}

func (c *cluster) lease() election.Record {
	obj, err := c.bucket.Get(context.Background(), election.Key, objstore.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var r election.Record
	if err := json.Unmarshal(obj.Data, &r); err != nil {
		c.t.Fatal(err)
	}
	return r
}

func TestOneLeaderIsElectedAndPublished(t *testing.T) {
	c := newCluster(t, 5, 1, nil)
	l := c.waitLeader(time.Second)
	c.run(time.Minute, 100*time.Millisecond)
	if got := c.leaders(); len(got) != 1 || got[0] != l {
		t.Fatalf("leaders after a quiet minute = %v, want [%d]", got, l)
	}
	r := c.lease()
	if r.LeaderID != fmt.Sprintf("node-%d", l) || r.LeaderAddr != fmt.Sprintf("[2001:db8::%d]:8081", l+1) {
		t.Errorf("lease record = %+v, want node-%d", r, l)
	}
	for i, e := range c.agents {
		if got, ok := e.Leader(); !ok || got.LeaderID != r.LeaderID {
			t.Errorf("node-%d observes leader %+v, want %s", i, got, r.LeaderID)
		}
	}
	// One renewal per RenewInterval: 12 in a minute, give or take one.
	if n := c.stores[l].Counts().PutIfMatch; n < 11 || n > 13 {
		t.Errorf("leader made %d renewals in a minute, want 12", n)
	}
}

// partition cuts agent old off the bucket and runs in 10 ms steps until
// another agent leads (at most limit), which it returns.
func (c *cluster) partition(old int, limit time.Duration) int {
	c.t.Helper()
	c.stores[old].SetRules(faultstore.Rule{Action: faultstore.Fail})
	for range limit / (10 * time.Millisecond) {
		c.run(10*time.Millisecond, 10*time.Millisecond)
		if l := c.leaders(); len(l) == 1 && l[0] != old {
			return l[0]
		}
	}
	c.t.Fatal("no follower took over from the partitioned leader")
	return -1
}

// TestFailoverWithinBound partitions the leader from the bucket: it must
// stop leading after Hold and a follower must take over within
// Timeout + RenewInterval of the last renewal, and never before it has
// seen the last renewal's version unchanged for more than Timeout.
// Requests take a few milliseconds, as real ones do, so a takeover a
// poll early is not hidden by exact arithmetic on the simulated clock.
func TestFailoverWithinBound(t *testing.T) {
	c := newCluster(t, 5, 2, nil)
	for _, s := range c.stores {
		s.SetRules(faultstore.Rule{Action: faultstore.Delay, Latency: 3 * time.Millisecond})
	}
	old := c.waitLeader(time.Second)
	c.run(7*time.Second, 10*time.Millisecond)
	lastRenewal := c.agents[old].ValidUntil().Add(-election.Hold)
	next := c.partition(old, 40*time.Second)
	term, _ := c.agents[next].Term()
	failover := term.Since.Sub(lastRenewal)
	// The follower wakes 1 ms after Timeout; the test clock moves in 10 ms steps.
	bound := election.Timeout + election.RenewInterval + 20*time.Millisecond
	t.Logf("failover %s after the last renewal (bound %s)", failover, bound)
	if failover <= election.Timeout || failover > bound {
		t.Errorf("failover took %s, want more than %s and at most %s", failover, election.Timeout, bound)
	}
	first, etag := c.firstSeen(next, term.Since)
	t.Logf("node-%d first saw the last renewal %s (%s) %s before it took over", next, etag, first, term.Since.Sub(first))
	if first.IsZero() || term.Since.Sub(first) <= election.Timeout {
		t.Errorf("node-%d took over %s after it first saw the last renewal, want more than %s", next, term.Since.Sub(first), election.Timeout)
	}
	// The partitioned leader stepped down by itself, before the takeover.
	if c.agents[old].IsLeader() {
		t.Error("the partitioned leader still believes it leads")
	}
	// When the partition heals it follows the new leader.
	c.stores[old].SetRules()
	c.run(30*time.Second, 100*time.Millisecond)
	if l := c.leaders(); len(l) != 1 || l[0] != next {
		t.Errorf("after healing leaders = %v, want [%d]", l, next)
	}
}

// TestResignIsTakenOverWithinOneRenewal stops the leader as on SIGTERM.
func TestResignIsTakenOverWithinOneRenewal(t *testing.T) {
	c := newCluster(t, 5, 3, nil)
	old := c.waitLeader(time.Second)
	c.run(12*time.Second, 100*time.Millisecond)
	resigned := c.clock.Now()
	c.kill(old)
	if r := c.lease(); r.LeaderID != "" {
		t.Fatalf("lease after resigning = %+v, want vacant", r)
	}
	next := c.waitLeader(election.RenewInterval + time.Second)
	term, _ := c.agents[next].Term()
	took := term.Since.Sub(resigned)
	t.Logf("takeover %s after the resignation", took)
	if next == old || took > election.RenewInterval {
		t.Errorf("node-%d took over %s after node-%d resigned, want another node within %s", next, took, old, election.RenewInterval)
	}
}

// TestAcquireHookErrorStepsDown fails the first leader's hook: it must
// resign, and another agent must lead.
func TestAcquireHookErrorStepsDown(t *testing.T) {
	var mu sync.Mutex
	failed := -1
	c := newCluster(t, 3, 4, func(_ *cluster, i int) error {
		mu.Lock()
		defer mu.Unlock()
		if failed < 0 || failed == i {
			failed = i
			return errors.New("cannot start leader work")
		}
		return nil
	})
	l := c.waitLeader(2 * election.RenewInterval)
	mu.Lock()
	defer mu.Unlock()
	if failed < 0 || l == failed {
		t.Fatalf("leader = node-%d, hook failed on node-%d", l, failed)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.events) < 3 || !c.events[0].acquire || c.events[0].agent != failed || c.events[1].acquire || c.events[1].agent != failed {
		t.Errorf("events = %+v, want node-%d to acquire and lose before anyone else", c.events, failed)
	}
}

// TestAmbiguousAcquireIsAdopted loses the reply to the winning write: the
// agent must find its own record and lead, not wait for it to expire.
func TestAmbiguousAcquireIsAdopted(t *testing.T) {
	c := newCluster(t, 1, 5, nil)
	c.kill(0)
	c.stores[0].SetRules(faultstore.Rule{Action: faultstore.Ambiguous, Ops: faultstore.WriteOps(), Limit: 2})
	c.start(0)
	c.waitLeader(time.Second)
	if inj := c.stores[0].Injected(); inj.Writes() != 1 {
		t.Fatalf("injected = %+v, want one ambiguous acquire", inj)
	}
	c.run(time.Minute, 100*time.Millisecond)
	if l := c.leaders(); len(l) != 1 {
		t.Fatalf("leaders = %v after an ambiguous renewal, want [0]", l)
	}
	if inj := c.stores[0].Injected(); inj.Writes() != 2 {
		t.Fatalf("injected = %+v, want an ambiguous renewal too", inj)
	}
}

// TestAtMostOneLeaderUnderFaults runs five agents for simulated hours
// through latency, ambiguous writes, failed requests and rolling
// partitions, checking every 100 ms that at most one agent leads.
func TestAtMostOneLeaderUnderFaults(t *testing.T) {
	for _, seed := range []uint64{11, 12, 13} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			faultRounds(t, newCluster(t, 5, seed*100, nil), 12)
		})
	}
}

// faultRounds partitions the current leader for 40 s of every simulated
// minute, with noisy requests throughout, checking every 100 ms that at
// most one agent leads, and then that one leads once the faults stop.
func faultRounds(t *testing.T, c *cluster, rounds int) {
	noisy := []faultstore.Rule{
		{Action: faultstore.Delay, Latency: 1500 * time.Millisecond, Probability: 0.2},
		{Action: faultstore.Delay, Latency: 3 * time.Second, Probability: 0.05},
		{Action: faultstore.Ambiguous, Ops: faultstore.WriteOps(), Probability: 0.15},
		{Action: faultstore.Fail, Probability: 0.1},
	}
	for _, s := range c.stores {
		s.SetRules(noisy...)
	}
	changes := 0
	for round := range rounds {
		// Partition the current leader (if any) for 40 s, then heal.
		victim := round % 5
		if l := c.leaders(); len(l) == 1 {
			victim = l[0]
		}
		c.stores[victim].SetRules(faultstore.Rule{Action: faultstore.Fail})
		c.run(40*time.Second, 100*time.Millisecond)
		c.stores[victim].SetRules(noisy...)
		c.run(20*time.Second, 100*time.Millisecond)
	}
	c.mu.Lock()
	for _, ev := range c.events {
		if ev.acquire {
			changes++
		}
	}
	c.mu.Unlock()
	t.Logf("%d acquisitions in %d simulated minutes", changes, rounds)
	if changes < rounds/2 {
		t.Errorf("only %d acquisitions: the partitions did not move the lease", changes)
	}
	for _, s := range c.stores {
		s.SetRules()
	}
	c.waitLeader(election.Timeout + 2*election.RenewInterval)
}

// TestAtMostOneLeaderUnderFaultsOnS3 is the fault scenario against a real
// S3 server (versitygw) instead of a local bucket.
func TestAtMostOneLeaderUnderFaultsOnS3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server")
	}
	srv := objstoretest.StartVersityGW(t)
	faultRounds(t, newClusterOn(t, s3storetest.NewBucket(t, srv), 5, 77, nil), 4)
}

// TestSlowAcquireHookKeepsTheLease lets the acquire hook take 4 s of the
// lease: the first renewal must come early enough to keep it.
func TestSlowAcquireHookKeepsTheLease(t *testing.T) {
	c := newCluster(t, 1, 6, func(c *cluster, _ int) error {
		// The hook runs on the agent's goroutine; wait on the fake clock.
		<-c.clock.For(0).After(4 * time.Second)
		return nil
	})
	c.waitLeader(5 * time.Second)
	c.run(time.Minute, 100*time.Millisecond)
	if l := c.leaders(); len(l) != 1 {
		t.Fatal("the lease lapsed after a slow acquire hook")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.events) != 1 {
		t.Errorf("events = %+v, want one acquisition and no loss", c.events)
	}
}

// TestCorruptLeaseExpires finds garbage at the lease key: nobody is
// reported as leader, and the record is taken over after Timeout.
func TestCorruptLeaseExpires(t *testing.T) {
	b := local.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := b.CreateBucket(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(t.Context(), election.Key, []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	c := newClusterOn(t, b, 3, 8, nil)
	c.run(election.Timeout-time.Second, 100*time.Millisecond)
	if l := c.leaders(); len(l) != 0 {
		t.Fatalf("leaders %v before the corrupt lease expired", l)
	}
	if r, ok := c.agents[0].Leader(); ok {
		t.Errorf("observed leader %+v in a corrupt lease", r)
	}
	c.waitLeader(election.RenewInterval + 2*time.Second)
}
