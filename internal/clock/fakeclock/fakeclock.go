// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package fakeclock

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Clock is a simulated monotonic clock, safe for concurrent use. Its
// Now and After (waits of owner 0) satisfy the clocks the agent takes.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at    time.Time
	owner int
	ch    chan time.Time
}

// New returns a clock that reads start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After is a timer of owner 0.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.after(0, d) }

func (c *Clock) after(owner int, d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: c.now.Add(d), owner: owner, ch: ch})
	return ch
}

// Advance moves the clock by d and fires every timer that came due.
func (c *Clock) Advance(d time.Duration) {
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

// Waiting reports whether a timer waits for exactly at.
func (c *Clock) Waiting(at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.waiters, func(w waiter) bool { return w.at.Equal(at) })
}

// Blocked reports whether owner has a pending timer.
func (c *Clock) Blocked(owner int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.waiters, func(w waiter) bool { return w.owner == owner })
}

// Forget drops the pending timers of a stopped owner, which nobody will
// receive, so that they do not count as it being blocked.
func (c *Clock) Forget(owner int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiters = slices.DeleteFunc(c.waiters, func(w waiter) bool { return w.owner == owner })
}

// For is owner's view of the clock: its timers are owner's.
func (c *Clock) For(owner int) Owned { return Owned{c: c, owner: owner} }

// Owned is one owner's view of a Clock.
type Owned struct {
	c     *Clock
	owner int
}

// Now is the clock's time.
func (o Owned) Now() time.Time { return o.c.Now() }

// After is a timer of the owner.
func (o Owned) After(d time.Duration) <-chan time.Time { return o.c.after(o.owner, d) }

// Sleep waits d on the owner's timer, or until ctx ends.
func (o Owned) Sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-o.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
