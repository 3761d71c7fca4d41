// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package election

import (
	"context"
	"log/slog"
	"sync"

	"podmin.dev/podmin/internal/objstore"
)

// Once is the election of a one-shot pass, which takes no part in
// coordination: the first time IsLeader is asked, it campaigns once
// (Elector.Campaign: it takes the lease only when it is missing, vacant
// or an earlier pass's own, never while another agent leads), and End
// resigns what it won. A pass that never asks never touches the lease.
type Once struct {
	ctx   context.Context
	el    *Elector
	log   *slog.Logger
	once  sync.Once
	leads bool
}

// NewOnce returns node's one-shot election on store; ctx bounds the
// campaign.
func NewOnce(ctx context.Context, node string, store objstore.Store, log *slog.Logger) (*Once, error) {
	el, err := New(Options{ID: node, Store: store, Log: log.With("component", "election")})
	if err != nil {
		return nil, err
	}
	return &Once{ctx: ctx, el: el, log: log}, nil
}

// IsLeader campaigns on the first call and reports whether the pass
// leads (workload.Leader).
func (o *Once) IsLeader() bool {
	o.once.Do(func() {
		o.leads = o.el.Campaign(o.ctx)
		if !o.leads {
			o.log.Info("another agent leads, or the lease is unreadable: this pass does not create or rotate the workload CA")
		}
	})
	return o.leads && o.el.IsLeader()
}

// End resigns the lease the pass won.
func (o *Once) End() { o.el.Resign() }
