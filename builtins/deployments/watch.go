// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deployments

import (
	"context"
	"time"

	"podmin.dev/podmin/builtins/openv"
)

// WatchOptions select what a watch shows (as Status) and how often it
// reads the status again.
type WatchOptions struct {
	StatusOptions
	// Poll is the interval between reads; zero means DefaultWaitPoll.
	Poll time.Duration
}

// Watch reads the status of the selected deployments (Status) every Poll
// on the Env's clock and passes each result to show, until every
// deployment shown is ready or ctx ends. Ready is decided as a wait for
// readiness decides it (reached): a NodeGroup whose status is not
// current, an unknown state, a node error or a node without a kubelet
// keeps a deployment from being ready. Unlike a wait, a node's error does
// not end a watch: it is shown until it is fixed or the operator stops.
// An error reading the status ends it, with the last result read.
func Watch(ctx context.Context, e *openv.Env, opts WatchOptions, show func(StatusResult) error) (StatusResult, error) {
	poll := opts.Poll
	if poll <= 0 {
		poll = DefaultWaitPoll
	}
	for {
		res, err := Status(ctx, e, opts.StatusOptions)
		if err != nil {
			return res, err
		}
		if err := show(res); err != nil {
			return res, err
		}
		if AllReady(res) {
			return res, nil
		}
		if err := e.Pause(ctx, poll); err != nil {
			return res, err
		}
	}
}

// AllReady says whether every deployment of res is ready, by the same
// decision as a wait for readiness. A result without deployments is.
func AllReady(res StatusResult) bool {
	for _, g := range res.NodeGroups {
		for _, d := range g.Deployments {
			if done, err := reached(d, UntilReady, g); !done || err != nil {
				return false
			}
		}
	}
	return true
}
