// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package fakeclock_test

import (
	"testing"
	"time"

	"podmin.dev/podmin/internal/clock/fakeclock"
)

// Timers fire when the clock reaches them, not before, and each counts
// for its owner until it fires or is forgotten.
func TestTimersFireWhenReached(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := fakeclock.New(start)
	a, b := c.For(1).After(time.Second), c.For(2).After(3*time.Second)
	if !c.Blocked(1) || !c.Blocked(2) || !c.Waiting(start.Add(time.Second)) || c.Blocked(3) {
		t.Fatal("pending timers not reported")
	}
	c.Advance(999 * time.Millisecond)
	select {
	case <-a:
		t.Fatal("fired early")
	default:
	}
	c.Advance(time.Millisecond)
	if got := <-a; !got.Equal(start.Add(time.Second)) || c.Blocked(1) {
		t.Fatalf("fired at %s, owner 1 blocked %v", got, c.Blocked(1))
	}
	c.Forget(2)
	c.Advance(time.Hour)
	select {
	case <-b:
		t.Fatal("a forgotten timer fired")
	default:
	}
	if got := <-c.After(0); !got.Equal(c.Now()) {
		t.Fatalf("a zero timer fired at %s, not now", got)
	}
}
