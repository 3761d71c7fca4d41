// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package openv

import (
	"context"
	"time"

	"podmin.dev/podmin/internal/clock"
)

// CurrentTime and Pause are the Env's clock (Now and Sleep), real by
// default.
func (e *Env) CurrentTime() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// Pause waits d or until ctx ends.
func (e *Env) Pause(ctx context.Context, d time.Duration) error {
	if e.Sleep != nil {
		return e.Sleep(ctx, d)
	}
	return clock.Sleep(ctx, d)
}
