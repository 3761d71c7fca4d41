// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"errors"
	"maps"
	"sync"
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
}

type counters struct {
	mu                         sync.Mutex
	passes, failures, restarts uint64
	pods                       map[string]uint64
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
	return Counters{Passes: c.passes, Failures: c.failures, Restarts: c.restarts, PodFailures: maps.Clone(c.pods)}
}
