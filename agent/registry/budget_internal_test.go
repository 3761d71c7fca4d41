// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A request that gives up waiting takes nothing and holds up nobody: a
// smaller request queued behind it is let through, and the budget is
// whole again once everything is given back.
func TestBudgetWaitersGiveUpCleanly(t *testing.T) {
	ctx := context.Background()
	b := newBudget(10)
	first, err := b.take(ctx, 6)
	if err != nil || first != 6 {
		t.Fatalf("take 6 of 10: %d, %v", first, err)
	}
	big, cancelBig := context.WithCancel(ctx)
	bigDone := make(chan error, 1)
	go func() { _, err := b.take(big, 8); bigDone <- err }()
	small := make(chan int64, 1)
	waitQueued(t, b, 1)
	go func() { n, _ := b.take(ctx, 4); small <- n }()
	waitQueued(t, b, 2)
	// The small request fits but waits its turn behind the big one.
	select {
	case <-small:
		t.Fatal("a later request went ahead of an earlier one")
	default:
	}
	cancelBig()
	if err := <-bigDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if n := <-small; n != 4 {
		t.Fatalf("small request took %d", n)
	}
	// More than the whole budget is capped to it.
	b.give(first)
	b.give(4)
	if n, err := b.take(ctx, 100); err != nil || n != 10 {
		t.Fatalf("take 100 of 10: %d, %v", n, err)
	}
	b.give(10)
	if b.free != 10 || len(b.queue) != 0 {
		t.Fatalf("budget after everything was given back: %d free, %d waiting", b.free, len(b.queue))
	}
}

func waitQueued(t *testing.T, b *budget, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		q := len(b.queue)
		b.mu.Unlock()
		if q == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}
