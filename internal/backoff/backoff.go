// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package backoff

import "time"

// Policy is a capped exponential backoff. The wait after the n-th
// consecutive failure is Min·2^(n-1), at most Max. With Rand set it is
// jittered into [d/2, d) ("equal jitter"): retriers that failed together
// spread out, yet none retries sooner than half the step.
type Policy struct {
	Min, Max time.Duration
	// Rand returns a number in [0, 1); nil waits exactly d.
	Rand func() float64
}

// Delay is the wait after the n-th consecutive failure (n ≥ 1; n below 1
// counts as 1).
func (p Policy) Delay(n int) time.Duration {
	d := p.Min
	if d <= 0 {
		return 0
	}
	for i := 1; i < n && d < p.Max; i++ {
		d *= 2
	}
	d = min(d, p.Max)
	if p.Rand == nil {
		return d
	}
	return d/2 + time.Duration(p.Rand()*float64(d/2))
}
