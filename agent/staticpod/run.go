// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"podmin.dev/podmin/internal/backoff"
	"podmin.dev/podmin/internal/objstore"
)

// DefaultInterval is the default poll period: one HEAD of the index while
// nothing changed.
const DefaultInterval = 5 * time.Second

// DefaultHintedInterval is the safety poll while the leader's index hints
// reach this node (LoopOptions.Hinted): the leader polls the index every
// second and hints every follower, so this poll only bounds how long a
// lost hint goes unnoticed.
const DefaultHintedInterval = time.Minute

// Reporter receives the outcome of every pass; nil err means healthy.
type Reporter interface {
	Report(component string, err error)
}

// Component is the name the Reconciler reports its health under.
const Component = "staticpod"

// LoopOptions pace the reconcile loop.
type LoopOptions struct {
	// Interval is the poll period: each wait is jittered within 80–100%
	// of it, so nodes spread their reads and a commit is seen within one
	// Interval.
	Interval time.Duration
	// Hinted, when set, reports whether the leader's index hints reach
	// this node now; while they do, the poll is HintedInterval instead.
	Hinted func() bool
	// HintedInterval is the safety poll while Hinted; zero means
	// DefaultHintedInterval.
	HintedInterval time.Duration
	// Vouched, when set, returns the safety poll while the leader's
	// heartbeats name the index version it polled (each names it again,
	// so a lost hint is made up within seconds): it applies after a clean
	// pass only, and zero means not vouched. A pass that kept Pods back
	// retries at Interval, hinted or not: their fix needs no commit.
	Vouched func() time.Duration
	// Timeout bounds one pass.
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the jittered exponential wait after
	// a failed pass.
	MinBackoff, MaxBackoff time.Duration
	// After returns a channel that fires after d (time.After by default).
	After func(d time.Duration) <-chan time.Time
	// Rand returns a number in [0, 1) for jitter (math/rand/v2 by default).
	Rand func() float64
	// Health receives each pass's outcome; nil reports nothing.
	Health Reporter
}

// Loop runs passes until ctx ends: one every Interval while healthy, with
// jittered exponential backoff after failures, and at once after Trigger.
type Loop struct {
	r       *Reconciler
	opts    LoopOptions
	trigger chan struct{}
}

// NewLoop paces r. Zero durations get defaults: 5 s interval, 2 min
// timeout, backoff from min(1 s, interval) to 30 s.
func NewLoop(r *Reconciler, opts LoopOptions) *Loop {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = min(time.Second, opts.Interval)
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(30*time.Second, opts.MinBackoff)
	}
	if opts.HintedInterval <= 0 {
		opts.HintedInterval = DefaultHintedInterval
	}
	if opts.After == nil {
		opts.After = time.After
	}
	if opts.Rand == nil {
		opts.Rand = rand.Float64
	}
	return &Loop{r: r, opts: opts, trigger: make(chan struct{}, 1)}
}

// Trigger asks for a pass now; triggers coalesce.
func (l *Loop) Trigger() {
	select {
	case l.trigger <- struct{}{}:
	default:
	}
}

// Hint is the leader's word that the index is now at etag: a pass runs
// now unless that version's NodeGroup state is already published. An
// empty etag always triggers one.
func (l *Loop) Hint(etag string) {
	if applied, ok := l.r.Applied(); ok && etag != "" && objstore.SameETag(applied, etag) {
		return
	}
	l.Trigger()
}

// IdentityChanged forces a full, index-fenced pass now.
func (l *Loop) IdentityChanged() {
	l.r.IdentityChanged()
	l.Trigger()
}

// backoff is the wait after the n-th consecutive failure, jittered into
// [d/2, d).
func (l *Loop) backoff(n int) time.Duration {
	return backoff.Policy{Min: l.opts.MinBackoff, Max: l.opts.MaxBackoff, Rand: l.opts.Rand}.Delay(n)
}

// Run reconciles until ctx ends, then returns nil: stopping the loop is the
// way to stop new reconciliation.
//
// Outcomes are told apart: a pass that kept some Pods at their last valid
// state is reported (not ready, naming them) and retried after Interval,
// without backoff, since the rest of the NodeGroup was published; an index
// that kept changing during the pass is no failure at all and is retried
// at once; anything else (bucket missing or unreadable, directory not
// writable) is an ERROR with jittered exponential backoff.
func (l *Loop) Run(ctx context.Context) error {
	failures := 0
	for {
		pctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
		_, err := l.r.Reconcile(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		interval := l.opts.Interval
		if l.opts.Hinted != nil && l.opts.Hinted() {
			interval = max(interval, l.opts.HintedInterval)
		}
		if err == nil && l.opts.Vouched != nil {
			interval = max(interval, l.opts.Vouched())
		}
		wait := time.Duration(float64(interval) * (0.8 + 0.2*l.opts.Rand()))
		report := true
		var pods *PodsFailedError
		switch {
		case err == nil:
			failures = 0
		case errors.As(err, &pods):
			failures = 0
			// What keeps a Pod back (a secret not created yet, an image
			// not pushed, a full disk) is fixed without a commit, so no
			// hint announces the fix: try again at the base pace.
			wait = time.Duration(float64(l.opts.Interval) * (0.8 + 0.2*l.opts.Rand()))
			err = fmt.Errorf("NodeGroup %s published, but %w", l.r.opts.NodeGroup, err)
		case errors.Is(err, ErrIndexChanged):
			// Commits keep arriving: the next pass starts after a short
			// jittered pause, and readiness keeps its last value.
			report = false
			wait = time.Duration(float64(10*time.Millisecond) * (1 + l.opts.Rand()))
			l.r.log.Debug("index still changing: starting a new pass", "err", err)
		default:
			failures++
			wait = l.backoff(failures)
			l.r.log.Error("reconcile failed: the node keeps its last valid state", "err", err, "retry_in", wait.String())
			err = fmt.Errorf("reconcile of NodeGroup %s failed (%d in a row): %w", l.r.opts.NodeGroup, failures, err)
		}
		if report && l.opts.Health != nil {
			l.opts.Health.Report(Component, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-l.trigger:
		case <-l.opts.After(wait):
		}
	}
}
