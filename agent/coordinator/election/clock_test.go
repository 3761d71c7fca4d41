// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package election_test

import (
	"context"
	"slices"
	"sync"
	"time"
)

// fakeClock is one simulated monotonic clock shared by several agents.
// Time moves only when the test advances it; every wait is tagged with the
// agent that waits, so the test can tell when all agents are blocked.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*waiter
}

type waiter struct {
	at    time.Time
	owner int
	ch    chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) after(owner int, d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, &waiter{at: c.now.Add(d), owner: owner, ch: ch})
	return ch
}

// advance moves the clock by d and fires every wait that has come due.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

// blocked reports whether owner has a pending wait.
func (c *fakeClock) blocked(owner int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.waiters {
		if w.owner == owner {
			return true
		}
	}
	return false
}

// forget drops the pending waits of a stopped agent, which nobody will
// receive, so they do not count as the agent being blocked.
func (c *fakeClock) forget(owner int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiters = slices.DeleteFunc(c.waiters, func(w *waiter) bool { return w.owner == owner })
}

// agentClock is one agent's view of the shared clock.
type agentClock struct {
	c     *fakeClock
	owner int
}

func (a agentClock) Now() time.Time                         { return a.c.Now() }
func (a agentClock) After(d time.Duration) <-chan time.Time { return a.c.after(a.owner, d) }

// sleep is the fault store's latency on this agent's clock.
func (a agentClock) sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-a.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
