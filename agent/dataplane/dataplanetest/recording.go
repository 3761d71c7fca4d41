// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplanetest

import (
	"context"
	"slices"
	"sync"
	"time"

	"podmin.dev/podmin/agent/dataplane"
)

// Recording stands in for the kernel dataplane: it records what it is
// given and answers what its fields say. Its zero value is a dataplane
// that inherited nothing, is pinned and applies everything.
type Recording struct {
	// Inherit and InheritedUntil are what Inherited reports: a dataplane
	// an earlier agent left forwarding, and its lease.
	Inherit        bool
	InheritedUntil time.Time
	// PinErr is what PinProblem reports.
	PinErr error

	mu       sync.Mutex
	applied  [][]dataplane.Service
	refresh  int
	detached bool
	renewed  []time.Time
	fail     error
}

// Renew records the lease's new end.
func (r *Recording) Renew(until time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.renewed = append(r.renewed, until)
	return nil
}

// Inherited reports Inherit and InheritedUntil.
func (r *Recording) Inherited() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.InheritedUntil, r.Inherit
}

// PinProblem reports PinErr.
func (r *Recording) PinProblem() error { return r.PinErr }

// Run waits for ctx and then counts as detached.
func (r *Recording) Run(ctx context.Context) error {
	<-ctx.Done()
	r.mu.Lock()
	r.detached = true
	r.mu.Unlock()
	return nil
}

// Apply records s, or returns the failure SetFail gave it.
func (r *Recording) Apply(_ context.Context, s []dataplane.Service) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.applied = append(r.applied, s)
	return nil
}

// Refresh counts a request to re-read the node's interfaces.
func (r *Recording) Refresh() {
	r.mu.Lock()
	r.refresh++
	r.mu.Unlock()
}

// SetFail makes every later Apply return err (nil: succeed again).
func (r *Recording) SetFail(err error) {
	r.mu.Lock()
	r.fail = err
	r.mu.Unlock()
}

// Applies is how many Apply calls succeeded.
func (r *Recording) Applies() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.applied)
}

// Last is what the last successful Apply was given, nil before one.
func (r *Recording) Last() []dataplane.Service {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.applied) == 0 {
		return nil
	}
	return r.applied[len(r.applied)-1]
}

// Renewals are the lease ends Renew was given, in order.
func (r *Recording) Renewals() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.renewed)
}

// Detached reports whether Run has returned.
func (r *Recording) Detached() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.detached
}
