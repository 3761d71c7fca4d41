// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"errors"
	"maps"
	"sync"
	"time"
)

// Counters are the Reconciler's monotonic counts since the process
// started, for the agent's loopback /metrics endpoint.
type Counters struct {
	// Passes counts completed Reconcile calls; Failures those that
	// failed as a whole (nothing or not everything could be published,
	// apart from single Pods).
	Passes, Failures uint64
	// Restarts counts passes restarted because the index changed.
	Restarts uint64
	// PodFailures counts, per Pod, the passes that kept it at its last
	// valid state.
	PodFailures map[string]uint64
	// Reads counts passes by how they learned the NodeGroup's desired
	// state (Result.Read); StaleViews the passes that found their view
	// failing its digest (the pass then waited briefly for it or read the
	// index).
	Reads      map[string]uint64
	StaleViews uint64
	// LastSuccess is when the last pass that published everything ended
	// (zero before the first); IndexConfirmed when a pass last confirmed
	// that the applied index is the committed one (also a pass that kept
	// some Pods at their last valid state).
	LastSuccess, IndexConfirmed time.Time
}

type counters struct {
	mu                         sync.Mutex
	now                        func() time.Time
	passes, failures, restarts uint64
	pods                       map[string]uint64
	lastSuccess, confirmed     time.Time
	reads                      map[string]uint64
	staleViews                 uint64
}

func (c *counters) read(how string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reads == nil {
		c.reads = map[string]uint64{}
	}
	c.reads[how]++
}

func (c *counters) add(n *uint64) {
	c.mu.Lock()
	*n++
	c.mu.Unlock()
}

func (c *counters) passed(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.passes++
	var pf *PodsFailedError
	if err != nil && !errors.As(err, &pf) && !errors.Is(err, ErrIndexChanged) {
		c.failures++
	}
	now := c.now()
	if err == nil {
		c.lastSuccess = now
	}
	if err == nil || errors.As(err, &pf) {
		c.confirmed = now
	}
}

func (c *counters) podFailures(fs []PodFailure) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range fs {
		c.pods[f.Pod]++
	}
}

// Counters returns a snapshot of the counts.
func (r *Reconciler) Counters() Counters {
	c := &r.counters
	c.mu.Lock()
	defer c.mu.Unlock()
	return Counters{Passes: c.passes, Failures: c.failures, Restarts: c.restarts, PodFailures: maps.Clone(c.pods),
		LastSuccess: c.lastSuccess, IndexConfirmed: c.confirmed, Reads: maps.Clone(c.reads), StaleViews: c.staleViews}
}
