// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package election

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"podmin.dev/podmin/internal/objstore"
)

// The lease's key and timing.
const (
	// Key is the lease record in the cluster bucket.
	Key = "dns/leader.json"
	// RenewInterval is how often the leader renews and followers poll.
	RenewInterval = 5 * time.Second
	// Timeout is how long a follower must see the same ETag before it
	// takes the lease over.
	Timeout = 15 * time.Second
	// Hold is how long after sending its last successful write a leader
	// still considers itself leader. Hold < Timeout is the safety margin.
	Hold = 10 * time.Second
	// RetryInterval paces retries after a failed request.
	RetryInterval = time.Second
	// RequestTimeout bounds every store request.
	RequestTimeout = 4 * time.Second
)

// Record is the content of the lease object. An empty LeaderID is a
// vacant lease, left by a resignation.
type Record struct {
	LeaderID    string    `json:"leaderID"`
	LeaderAddr  string    `json:"leaderAddr"`
	LastUpdated time.Time `json:"lastUpdated"`
	// Term numbers the leadership: every acquisition claims a term above
	// every term this agent has seen (in the lease, or raised by
	// RaiseTerm), renewals keep it, and a resignation leaves it in the
	// vacant record. Snapshot writers are fenced by it.
	Term uint64 `json:"term,omitempty"`
}

// Term describes one leadership: the record as last written and its ETag.
type Term struct {
	Record Record
	ETag   string
	// Since is when the winning write was sent, on the local clock.
	Since time.Time
	// Took is the record the acquisition replaced: empty when the lease
	// was missing or vacant. When its LeaderID and LeaderAddr are this
	// agent's, an earlier run of this agent held the lease, and its
	// LastUpdated was written by this machine's own clock.
	Took Record
}

// Store is the part of the bucket the election uses.
type Store interface {
	Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error)
	PutIfAbsent(ctx context.Context, key string, data []byte) (string, error)
	PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error)
}

// Clock is the local monotonic clock; tests pass a fake one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options configure an Elector.
type Options struct {
	// ID is this agent's node ID; Addr is where its coordination API
	// listens (host:port). Both are published while it leads.
	ID, Addr string
	// Store is the cluster bucket.
	Store Store
	// Key overrides the lease key (tests); empty means Key.
	Key string
	// Clock is the local clock; nil means the real one.
	Clock Clock
	// OnAcquire runs when this agent becomes leader, with a context that
	// ends when leadership ends. It must return promptly (start goroutines
	// for long work); an error steps down at once.
	OnAcquire func(ctx context.Context, t Term) error
	// OnLose runs when a leadership that OnAcquire accepted ends.
	OnLose func(t Term, reason string)
	// OnObserve runs when the observed leader (ID or address) changes,
	// also to vacant (empty Record.LeaderID).
	OnObserve func(r Record)
	// Quiet, when set, tells a follower how much longer it may leave the
	// lease unread: the leader it observed vouches for its lease over a
	// live, authenticated link (see doc.go). While it returns a positive
	// duration the follower makes no request; once it returns zero (call
	// Wake to end a wait early) the follower reads the lease at once and
	// forgets what it saw before, so a takeover still needs Timeout of its
	// own observation.
	Quiet func() time.Duration
	// Timing overrides the lease timing; the zero value means the
	// defaults (RenewInterval, Timeout, Hold, RetryInterval). Only tests
	// that run real processes against a real clock shorten it.
	Timing Timing
	// Log receives transitions; nil discards them.
	Log *slog.Logger
}

// Timing is the lease timing. Hold must be shorter than Timeout.
type Timing struct {
	Renew, Timeout, Hold, Retry time.Duration
}

// DefaultTiming is the timing the cluster runs with.
func DefaultTiming() Timing {
	return Timing{Renew: RenewInterval, Timeout: Timeout, Hold: Hold, Retry: RetryInterval}
}

// Elector takes part in the election. Run drives it; the other methods are
// safe for concurrent use.
type Elector struct {
	opts  Options
	t     Timing
	key   string
	clock Clock
	log   *slog.Logger

	mu         sync.Mutex
	leading    bool
	term       Term
	written    []byte // the exact bytes of the last record this agent wrote
	validUntil time.Time
	cancel     context.CancelFunc
	observed   Record
	// maxTerm is the highest term this agent has seen or held.
	maxTerm uint64
	// twin is the address of another agent last seen holding the lease
	// under this agent's ID, reported once per address.
	twin string

	// follower state, touched only by Run's goroutine
	seenETag  string
	firstSeen time.Time
	backoff   time.Time // no candidacy before this (after a failed acquire hook)
	quiet     bool      // the last step skipped the read on Quiet's word

	wake chan struct{}
}

// New checks the options.
func New(opts Options) (*Elector, error) {
	if opts.ID == "" || opts.Store == nil {
		return nil, errors.New("election: an ID and a store are required")
	}
	e := &Elector{opts: opts, t: opts.Timing, key: opts.Key, clock: opts.Clock, log: opts.Log, wake: make(chan struct{}, 1)}
	if e.t == (Timing{}) {
		e.t = DefaultTiming()
	}
	if e.t.Hold <= 0 || e.t.Hold >= e.t.Timeout || e.t.Renew <= 0 || e.t.Retry <= 0 {
		return nil, fmt.Errorf("election: timing %+v needs 0 < Hold < Timeout and positive Renew and Retry", e.t)
	}
	if e.key == "" {
		e.key = Key
	}
	if e.clock == nil {
		e.clock = realClock{}
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	e.log = e.log.With("node", opts.ID)
	return e, nil
}

// IsLeader reports whether this agent leads now: it won the lease and its
// last successful write was sent less than Hold ago.
func (e *Elector) IsLeader() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leading && e.clock.Now().Before(e.validUntil)
}

// Term returns the current term and whether this agent leads now.
func (e *Elector) Term() (Term, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.term, e.leading && e.clock.Now().Before(e.validUntil)
}

// ValidUntil is the instant this agent's leadership lapses unless renewed
// (zero when it does not lead).
func (e *Elector) ValidUntil() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.leading {
		return time.Time{}
	}
	return e.validUntil
}

// RaiseTerm makes the next acquisition claim a term above t: a snapshot
// written under a term this agent's lease history never showed (the lease
// object was deleted or reset) must not look newer than its own.
func (e *Elector) RaiseTerm(t uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.maxTerm = max(e.maxTerm, t)
}

// Leader returns the leader this agent last observed (itself while it
// leads); ok is false when the lease is vacant or unknown.
func (e *Elector) Leader() (Record, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.observed, e.observed.LeaderID != ""
}

// Run takes part until ctx ends; then, if it leads, it resigns by
// compare-and-swap (a vacant record) so a follower takes over at its next
// poll. Cancel ctx on SIGTERM.
func (e *Elector) Run(ctx context.Context) error {
	for {
		wait := e.step(ctx)
		select {
		case <-ctx.Done():
			e.resign(shutdownReason)
			return nil
		case <-e.clock.After(wait):
		case <-e.wake:
		}
	}
}

// Wake ends Run's current wait, so a follower whose Quiet has just ended
// reads the lease now rather than when its wait runs out.
func (e *Elector) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *Elector) step(ctx context.Context) time.Duration {
	e.mu.Lock()
	leading := e.leading
	e.mu.Unlock()
	if leading {
		return e.renew(ctx)
	}
	return e.observe(ctx)
}

// shutdownReason is the reason of the resignation when Run's context ends.
const shutdownReason = "shutting down"

// record encodes a record stamped later than the previous one, so every
// write changes the ETag even when the clock did not move.
func (e *Elector) record(id, addr string, term uint64, now time.Time) ([]byte, Record) {
	r := Record{LeaderID: id, LeaderAddr: addr, LastUpdated: now.Round(0).UTC(), Term: term}
	e.mu.Lock()
	if !r.LastUpdated.After(e.term.Record.LastUpdated) {
		r.LastUpdated = e.term.Record.LastUpdated.Add(time.Nanosecond)
	}
	e.mu.Unlock()
	data, _ := json.Marshal(r) // a struct of strings and a time cannot fail
	return data, r
}

func (e *Elector) get(ctx context.Context) (objstore.Object, error) {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	return e.opts.Store.Get(ctx, e.key, objstore.GetOptions{})
}

// renew extends the lease by compare-and-swap on the ETag this agent wrote.
func (e *Elector) renew(ctx context.Context) time.Duration {
	sent := e.clock.Now()
	e.mu.Lock()
	etag, valid, term := e.term.ETag, e.validUntil, e.term.Record.Term
	e.mu.Unlock()
	if !sent.Before(valid) {
		e.lose("the lease lapsed before a renewal succeeded")
		return 0
	}
	data, rec := e.record(e.opts.ID, e.opts.Addr, term, sent)
	rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	newETag, err := e.opts.Store.PutIfMatch(rctx, e.key, data, etag)
	cancel()
	if err != nil && ctx.Err() == nil && !errors.Is(err, objstore.ErrPrecondition) && !errors.Is(err, objstore.ErrNotFound) {
		// Ambiguous or transient: the write may have landed.
		if obj, gerr := e.get(ctx); gerr == nil {
			if bytes.Equal(obj.Data, data) {
				newETag, err = obj.ETag, nil
			} else if obj.ETag != etag {
				err = fmt.Errorf("%w: the lease changed hands", objstore.ErrPrecondition)
			}
		}
	}
	switch {
	case err == nil:
		e.mu.Lock()
		e.term.ETag, e.term.Record, e.written = newETag, rec, data
		e.validUntil = sent.Add(e.t.Hold)
		e.mu.Unlock()
		return e.t.Renew
	case errors.Is(err, objstore.ErrPrecondition) || errors.Is(err, objstore.ErrNotFound):
		e.lose("another agent took the lease")
		return 0
	default:
		e.log.Warn("lease renewal failed: retrying", "err", err)
		return min(e.t.Retry, max(valid.Sub(e.clock.Now()), 0))
	}
}

// observe reads the lease and becomes a candidate when it is missing,
// vacant, its own, or unchanged for longer than Timeout.
func (e *Elector) observe(ctx context.Context) time.Duration {
	if e.opts.Quiet != nil {
		if d := e.opts.Quiet(); d > 0 {
			e.quiet = true
			return min(d, e.t.Renew)
		}
		if e.quiet {
			// The versions read before the quiet spell say nothing about
			// the writes during it: the wait for Timeout starts over at
			// the next read.
			e.quiet, e.seenETag, e.firstSeen = false, "", time.Time{}
		}
	}
	obj, err := e.get(ctx)
	now := e.clock.Now() // after the response: the observed write landed before it
	if errors.Is(err, objstore.ErrNotFound) {
		e.setObserved(Record{})
		if now.Before(e.backoff) {
			return e.backoff.Sub(now)
		}
		return e.acquire(ctx, Record{}, func(ctx context.Context, data []byte) (string, error) {
			return e.opts.Store.PutIfAbsent(ctx, e.key, data)
		})
	}
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("reading the lease failed: retrying", "err", err)
		}
		return e.t.Retry
	}
	var rec Record
	if jerr := json.Unmarshal(obj.Data, &rec); jerr != nil {
		// A corrupt lease is held by nobody known; it expires like any other.
		rec = Record{LeaderID: "?"}
		e.setObserved(Record{})
	} else {
		e.RaiseTerm(rec.Term)
		e.setObserved(rec)
	}
	if obj.ETag != e.seenETag {
		e.seenETag, e.firstSeen = obj.ETag, now
	}
	stale := now.Sub(e.firstSeen) > e.t.Timeout
	// The record is this agent's own (left by its previous run) only when
	// its address is this agent's too: another agent under the same node
	// ID is a foreign leader, never taken over before it expires.
	own := rec.LeaderID == e.opts.ID && rec.LeaderAddr == e.opts.Addr
	if rec.LeaderID == e.opts.ID && !own && rec.LeaderAddr != e.twin {
		e.twin = rec.LeaderAddr
		e.log.Error("another agent holds the lease under this node's ID: two agents share one node ID; give each its own node ID",
			"other", rec.LeaderAddr, "addr", e.opts.Addr)
	}
	if !(rec.LeaderID == "" || own || stale) {
		return min(e.t.Renew, e.firstSeen.Add(e.t.Timeout+time.Millisecond).Sub(now))
	}
	if now.Before(e.backoff) {
		return min(e.t.Renew, e.backoff.Sub(now))
	}
	etag := obj.ETag
	return e.acquire(ctx, rec, func(ctx context.Context, data []byte) (string, error) {
		return e.opts.Store.PutIfMatch(ctx, e.key, data, etag)
	})
}

// acquire tries to write the lease over prev, claiming a term above
// prev's and every term seen, and when it wins, runs OnAcquire.
func (e *Elector) acquire(ctx context.Context, prev Record, write func(context.Context, []byte) (string, error)) time.Duration {
	sent := e.clock.Now()
	e.mu.Lock()
	next := max(prev.Term, e.maxTerm) + 1
	e.mu.Unlock()
	data, rec := e.record(e.opts.ID, e.opts.Addr, next, sent)
	rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	etag, err := write(rctx, data)
	cancel()
	if err != nil && ctx.Err() == nil && !errors.Is(err, objstore.ErrPrecondition) && !errors.Is(err, objstore.ErrNotFound) {
		if obj, gerr := e.get(ctx); gerr == nil && bytes.Equal(obj.Data, data) {
			etag, err = obj.ETag, nil // the ambiguous write landed
		}
	}
	if err != nil {
		if !errors.Is(err, objstore.ErrPrecondition) && ctx.Err() == nil {
			e.log.Warn("taking the lease failed: retrying", "err", err)
			return e.t.Retry
		}
		return 0 // lost the race: observe the winner at once
	}
	term := Term{Record: rec, ETag: etag, Since: sent, Took: prev}
	lctx, lcancel := context.WithCancel(context.WithoutCancel(ctx))
	e.mu.Lock()
	e.leading, e.term, e.written, e.validUntil, e.cancel = true, term, data, sent.Add(e.t.Hold), lcancel
	e.maxTerm = max(e.maxTerm, rec.Term)
	e.seenETag, e.firstSeen = etag, sent
	e.observed = rec
	e.mu.Unlock()
	e.log.Info("acquired the lease", "etag", etag, "term", rec.Term)
	if e.opts.OnObserve != nil {
		e.opts.OnObserve(rec)
	}
	if e.opts.OnAcquire != nil {
		if herr := e.opts.OnAcquire(lctx, term); herr != nil {
			e.log.Error("the acquire hook failed: stepping down", "err", herr)
			e.resign("acquire hook failed: " + herr.Error())
			e.backoff = e.clock.Now().Add(e.t.Timeout)
			return e.t.Retry
		}
	}
	// A slow hook ate into the lease: renew early enough to keep it.
	left := sent.Add(e.t.Hold).Sub(e.clock.Now())
	return max(0, min(e.t.Renew, left-e.t.Hold/2))
}

func (e *Elector) setObserved(r Record) {
	e.mu.Lock()
	old := e.observed
	e.observed = r
	e.mu.Unlock()
	if (old.LeaderID != r.LeaderID || old.LeaderAddr != r.LeaderAddr) && e.opts.OnObserve != nil {
		e.opts.OnObserve(r)
	}
}

// lose ends leadership without touching the store.
func (e *Elector) lose(reason string) {
	e.mu.Lock()
	if !e.leading {
		e.mu.Unlock()
		return
	}
	term, cancel := e.term, e.cancel
	e.leading, e.validUntil, e.cancel = false, time.Time{}, nil
	e.mu.Unlock()
	cancel()
	level := slog.LevelWarn
	if reason == shutdownReason {
		level = slog.LevelInfo // a normal stop, not a fault
	}
	e.log.Log(context.Background(), level, "lost the lease", "reason", reason, "term", term.Record.Term)
	if e.opts.OnLose != nil {
		e.opts.OnLose(term, reason)
	}
}

// resign ends leadership and, best effort, leaves a vacant record by
// compare-and-swap so a follower need not wait for the lease to expire.
func (e *Elector) resign(reason string) {
	e.mu.Lock()
	leading, etag, term := e.leading, e.term.ETag, max(e.term.Record.Term, e.maxTerm)
	e.mu.Unlock()
	if !leading {
		return
	}
	e.lose(reason)
	// The vacant record keeps the term, so the next leader claims a
	// higher one.
	data, _ := e.record("", "", term, e.clock.Now())
	ctx, cancel := context.WithTimeout(context.Background(), RequestTimeout)
	defer cancel()
	if _, err := e.opts.Store.PutIfMatch(ctx, e.key, data, etag); err != nil {
		e.log.Warn("resigning the lease failed: followers take over when it expires", "err", err)
		return
	}
	e.log.Info("resigned the lease")
}

// Campaign is one round of the election for an agent that does not take
// part continuously (a one-shot pass): it reads the lease once and takes
// it only when it is missing, vacant or held by an earlier run of this
// agent, never when another agent holds it, however old its record. It
// reports whether this agent leads now; Resign ends the leadership.
func (e *Elector) Campaign(ctx context.Context) bool {
	e.observe(ctx)
	return e.IsLeader()
}

// Resign ends this agent's leadership, if any, and leaves a vacant lease
// so that another agent takes over at once, as Run does when its context
// ends.
func (e *Elector) Resign() { e.resign(shutdownReason) }
