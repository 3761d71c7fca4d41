// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"podmin.dev/podmin/agent/staticpod"
)

// A loop whose leader hints reach it polls at the safety interval, and at
// the normal interval without them; a hint naming the applied version
// runs no pass, any other hint runs one at once.
func TestLoopPacesByHintsAndSkipsHintsItHasApplied(t *testing.T) {
	f := newFixture(t)
	f.deploy(t, "workers", "web", "web:v1", false)
	r := f.reconciler(t, nil)
	var (
		mu    sync.Mutex
		waits []time.Duration
	)
	after := func(d time.Duration) <-chan time.Time {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return nil // only a trigger ends the wait
	}
	lastWait := func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		if len(waits) == 0 {
			return 0
		}
		return waits[len(waits)-1]
	}
	var hinted atomic.Bool
	hinted.Store(true)
	loop := staticpod.NewLoop(r, staticpod.LoopOptions{Interval: 5 * time.Second, HintedInterval: time.Minute,
		Hinted: hinted.Load, After: after, Rand: func() float64 { return 1 }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = loop.Run(ctx) }()
	defer func() { cancel(); <-done }()
	passes := func() uint64 { return r.Counters().Passes }
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not within 10s: %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor("the first pass", func() bool { return passes() == 1 && lastWait() == time.Minute })
	etag, ok := r.Applied()
	if !ok || etag == "" {
		t.Fatalf("applied %q, %v", etag, ok)
	}
	// A hint for what is applied runs nothing.
	loop.Hint(etag)
	time.Sleep(50 * time.Millisecond) // give a wrongly started pass time to show
	if passes() != 1 {
		t.Fatalf("a hint naming the applied version ran a pass: %d passes", passes())
	}
	// A new version is hinted: one pass at once, which publishes it.
	f.deploy(t, "workers", "web", "web:v2", false)
	hinted.Store(false)
	loop.Hint(`"another-etag"`)
	waitFor("the hinted pass", func() bool { return passes() == 2 && lastWait() == 5*time.Second })
	if etag2, _ := r.Applied(); etag2 == etag {
		t.Fatal("the hinted pass did not apply the new version")
	}
}

// While the leader vouches for the index, a clean pass waits the vouched
// safety poll; without its word the loop falls back to the hinted pace.
func TestLoopWaitsTheVouchedSafetyPoll(t *testing.T) {
	f := newFixture(t)
	f.deploy(t, "workers", "web", "web:v1", false)
	r := f.reconciler(t, nil)
	waits := make(chan time.Duration, 10)
	after := func(d time.Duration) <-chan time.Time {
		waits <- d
		return nil // only a trigger ends the wait
	}
	var vouched atomic.Int64
	vouched.Store(int64(20 * time.Minute))
	loop := staticpod.NewLoop(r, staticpod.LoopOptions{Interval: 5 * time.Second, HintedInterval: time.Minute,
		Hinted: func() bool { return true }, Vouched: func() time.Duration { return time.Duration(vouched.Load()) },
		After: after, Rand: func() float64 { return 1 }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = loop.Run(ctx) }()
	defer func() { cancel(); <-done }()
	next := func() time.Duration {
		t.Helper()
		select {
		case d := <-waits:
			return d
		case <-time.After(10 * time.Second):
			t.Fatal("no pass within 10s")
			return 0
		}
	}
	if d := next(); d != 20*time.Minute {
		t.Fatalf("wait after a clean vouched pass = %s, want 20m", d)
	}
	vouched.Store(0)
	loop.Trigger()
	if d := next(); d != time.Minute {
		t.Fatalf("wait once the leader no longer vouches = %s, want the hinted 1m", d)
	}
}

// A pass that kept a Pod back is retried at the base interval even while
// the leader's hints would slow the loop: what keeps a Pod back (a secret
// not created yet, an image not pushed) is fixed without a commit, so no
// hint ever announces the fix.
func TestLoopRetriesKeptPodsAtTheBasePace(t *testing.T) {
	f := newFixture(t)
	f.deploy(t, "workers", "web", "web:v1", false, "missing")
	r := f.reconciler(t, nil)
	waits := make(chan time.Duration, 16)
	after := func(d time.Duration) <-chan time.Time {
		waits <- d
		return nil
	}
	loop := staticpod.NewLoop(r, staticpod.LoopOptions{Interval: 5 * time.Second, HintedInterval: time.Minute,
		Hinted: func() bool { return true }, After: after, Rand: func() float64 { return 1 }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = loop.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case d := <-waits:
		if d != 5*time.Second {
			t.Fatalf("after a pass that kept web back the loop waits %s, want the base 5s", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no pass within 10s")
	}
	if c := r.Counters(); c.PodFailures["web"] == 0 {
		t.Fatalf("the pass kept no Pod back: %+v", c)
	}
}
