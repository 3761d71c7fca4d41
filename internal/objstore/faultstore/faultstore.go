// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package faultstore

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"podmin.dev/podmin/internal/clock"
	"podmin.dev/podmin/internal/objstore"
)

var _ objstore.Store = (*Store)(nil)

// Store is an objstore.Store that counts and faults the calls it forwards
// to an inner store. It is safe for concurrent use; with concurrent callers
// the order in which they draw from the RNG, and so which one is faulted,
// follows the scheduler.
type Store struct {
	inner objstore.Store
	sleep func(ctx context.Context, d time.Duration) error

	mu       sync.Mutex
	rng      *rand.Rand
	rules    []ruleState
	calls    Counts
	injected Counts
}

// Option configures New.
type Option func(*Store)

// WithSeed seeds the RNG behind Rule.Probability; the default seed is 1, so
// runs are reproducible unless a test asks otherwise.
func WithSeed(seed uint64) Option {
	return func(s *Store) { s.rng = newRand(seed) }
}

// WithRules installs fault rules; without any, the store only counts.
func WithRules(rules ...Rule) Option {
	return func(s *Store) { s.SetRules(rules...) }
}

// WithSleep replaces the wait of Delay rules, for example with a fake clock.
// sleep must return ctx.Err() if the context ends first.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(s *Store) { s.sleep = sleep }
}

// New wraps inner.
func New(inner objstore.Store, opts ...Option) *Store {
	s := &Store{inner: inner, sleep: clock.Sleep, rng: newRand(1)}
	for _, opt := range opts {
		opt(s)
	}
	return s
}

func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// SetRules replaces the rules and restarts their Skip and Limit counters,
// for tests that set up state before turning faults on.
func (s *Store) SetRules(rules ...Rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = make([]ruleState, len(rules))
	for i, r := range rules {
		s.rules[i] = ruleState{Rule: r}
	}
}

// Counts returns how many calls of each operation were made on the
// wrapper, whether or not a fault was injected.
func (s *Store) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Injected returns how many calls of each operation got an injected error
// (Fail or Ambiguous); delays are not counted.
func (s *Store) Injected() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.injected
}

// ResetCounts zeroes Counts and Injected, so a test can measure one step.
func (s *Store) ResetCounts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls, s.injected = Counts{}, Counts{}
}

// plan is the faults chosen for one call.
type plan struct {
	delay     time.Duration
	fail      error
	ambiguous bool
}

// choose counts the call and applies the rules to it.
func (s *Store) choose(op Op, key string) plan {
	s.mu.Lock()
	defer s.mu.Unlock()
	*s.calls.field(op)++ // op is always one of the constants
	var p plan
	for i := range s.rules {
		r := &s.rules[i]
		if !r.selects(op, key) {
			continue
		}
		r.seen++
		if r.seen <= r.Skip || (r.Limit > 0 && r.fired >= r.Limit) {
			continue
		}
		if r.Probability > 0 && r.Probability < 1 && s.rng.Float64() >= r.Probability {
			continue
		}
		r.fired++
		switch r.Action {
		case Delay:
			p.delay += r.Latency
		case Ambiguous:
			p.ambiguous = true
		case Fail:
			p.fail = fmt.Errorf("%s %q: %w", op, key, ErrInjected)
			if r.Err != nil {
				p.fail = fmt.Errorf("%s %q: %w: %w", op, key, ErrInjected, r.Err)
			}
		}
		if p.fail != nil {
			break
		}
	}
	if p.fail != nil || p.ambiguous {
		*s.injected.field(op)++
	}
	return p
}

// do runs call under the faults chosen for op on key.
func do[T any](ctx context.Context, s *Store, op Op, key string, call func() (T, error)) (T, error) {
	var zero T
	p := s.choose(op, key)
	if p.delay > 0 {
		if err := s.sleep(ctx, p.delay); err != nil {
			return zero, fmt.Errorf("%s %q: injected delay: %w", op, key, err)
		}
	}
	if p.fail != nil {
		return zero, p.fail
	}
	v, err := call()
	if err == nil && p.ambiguous {
		return zero, fmt.Errorf("%s %q: %w", op, key, ErrAmbiguous)
	}
	return v, err
}

// Get forwards to the inner store under the rules for OpGet.
func (s *Store) Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	return do(ctx, s, OpGet, key, func() (objstore.Object, error) { return s.inner.Get(ctx, key, opts) })
}

// Head forwards to the inner store under the rules for OpHead.
func (s *Store) Head(ctx context.Context, key string) (objstore.Info, error) {
	return do(ctx, s, OpHead, key, func() (objstore.Info, error) { return s.inner.Head(ctx, key) })
}

// PutIfAbsent forwards to the inner store under the rules for OpPutIfAbsent.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) (string, error) {
	return do(ctx, s, OpPutIfAbsent, key, func() (string, error) { return s.inner.PutIfAbsent(ctx, key, data) })
}

// PutIfMatch forwards to the inner store under the rules for OpPutIfMatch.
func (s *Store) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	return do(ctx, s, OpPutIfMatch, key, func() (string, error) { return s.inner.PutIfMatch(ctx, key, data, etag) })
}

// Put forwards to the inner store under the rules for OpPut.
func (s *Store) Put(ctx context.Context, key string, data []byte) (string, error) {
	return do(ctx, s, OpPut, key, func() (string, error) { return s.inner.Put(ctx, key, data) })
}

// Delete forwards to the inner store under the rules for OpDelete.
func (s *Store) Delete(ctx context.Context, key string, ifMatch string) error {
	_, err := do(ctx, s, OpDelete, key, func() (struct{}, error) { return struct{}{}, s.inner.Delete(ctx, key, ifMatch) })
	return err
}

// List forwards to the inner store under the rules for OpList; rules match
// their Prefix against the listed prefix.
func (s *Store) List(ctx context.Context, prefix string, opts objstore.ListOptions) (objstore.ListPage, error) {
	return do(ctx, s, OpList, prefix, func() (objstore.ListPage, error) { return s.inner.List(ctx, prefix, opts) })
}

var _ objstore.Streamer = (*Store)(nil)

// Open forwards to the inner store (objstore.OpenObject) under the rules
// for OpGet: a streamed read is one GET request.
func (s *Store) Open(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	var opened *objstore.Reader
	r, err := do(ctx, s, OpGet, key, func() (*objstore.Reader, error) {
		r, err := objstore.OpenObject(ctx, s.inner, key, opts)
		opened = r
		return r, err
	})
	if err != nil && opened != nil {
		// A lost reply: the inner store opened the object.
		opened.Close()
	}
	return r, err
}

// Write forwards to the inner store (objstore.WriteObject) under the rules
// of the request it is: OpPutIfAbsent, OpPutIfMatch or OpPut.
func (s *Store) Write(ctx context.Context, key string, body io.Reader, size int64, opts objstore.PutOptions) (string, error) {
	op := OpPut
	switch {
	case opts.IfAbsent:
		op = OpPutIfAbsent
	case opts.IfMatch != "":
		op = OpPutIfMatch
	}
	return do(ctx, s, op, key, func() (string, error) { return objstore.WriteObject(ctx, s.inner, key, body, size, opts) })
}
