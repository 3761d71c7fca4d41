// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"
	"errors"
	"sync"
	"time"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator/election"
)

// leaderState is one leadership's view of the nodes' reports.
type leaderState struct {
	writer *Writer
	dirty  chan struct{}

	mu      sync.Mutex
	reports map[string]nodeReport
	snap    *pb.ServiceSnapshot
}

type nodeReport struct {
	eps []Endpoint
	at  time.Time
}

func (l *leaderState) report(node string, eps []Endpoint, now time.Time) {
	l.mu.Lock()
	l.reports[node] = nodeReport{eps: append([]Endpoint(nil), eps...), at: now}
	l.mu.Unlock()
	select {
	case l.dirty <- struct{}{}:
	default:
	}
}

// fresh returns the reports heard within retention, expiring the rest.
func (l *leaderState) fresh(now time.Time, retention time.Duration) []NodeReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []NodeReport
	for node, r := range l.reports {
		if now.Sub(r.at) > retention {
			delete(l.reports, node)
			continue
		}
		out = append(out, NodeReport{NodeID: node, Endpoints: r.eps})
	}
	return out
}

func (l *leaderState) position() (uint64, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writer.Generation(), l.snap.GetRevision()
}

func (l *leaderState) current() *pb.ServiceSnapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.snap
}

// acquire is the election's acquire hook: it claims the next snapshot
// generation (an error steps down) and starts the leader's work.
func (c *Coordinator) acquire(ctx context.Context, term election.Term) error {
	w := NewWriter(c.opts.Store, c.opts.NodeID)
	bctx, cancel := context.WithTimeout(ctx, election.RequestTimeout)
	defer cancel()
	if _, err := w.Begin(bctx); err != nil {
		return err
	}
	l := &leaderState{writer: w, dirty: make(chan struct{}, 1), reports: map[string]nodeReport{}}
	c.mu.Lock()
	l.reports[c.opts.NodeID] = nodeReport{eps: c.local, at: c.clock.Now()}
	c.leader = l
	c.mu.Unlock()
	c.log.Info("leading: collecting endpoints", "generation", w.Generation())
	go c.lead(ctx, l)
	return nil
}

// lose is the election's lose hook.
func (c *Coordinator) lose(term election.Term, reason string) {
	c.mu.Lock()
	c.leader = nil
	c.mu.Unlock()
	c.server.EndWatches()
	c.poke()
}

// lead rebuilds and persists the snapshot when reports arrive and every
// renew interval, until leadership ends.
func (c *Coordinator) lead(ctx context.Context, l *leaderState) {
	for {
		c.publish(ctx, l)
		select {
		case <-ctx.Done():
			return
		case <-l.dirty:
		case <-c.clock.After(c.timing.Renew):
		}
	}
}

func (c *Coordinator) publish(ctx context.Context, l *leaderState) {
	now := c.clock.Now()
	c.mu.Lock()
	self := c.local
	c.mu.Unlock()
	l.mu.Lock()
	l.reports[c.opts.NodeID] = nodeReport{eps: self, at: now}
	l.mu.Unlock()
	reports := l.fresh(now, c.opts.Retention)
	var services []ServiceID
	if c.opts.Services != nil {
		var err error
		if services, err = c.opts.Services(ctx); err != nil {
			c.log.Warn("reading the Services failed: keeping the last snapshot", "err", err)
			return
		}
	} else {
		seen := map[ServiceID]bool{}
		for _, r := range reports {
			for _, e := range r.Endpoints {
				if !seen[e.Service] {
					seen[e.Service] = true
					services = append(services, e.Service)
				}
			}
		}
	}
	snap := BuildSnapshot(services, reports)
	if !c.elector.IsLeader() {
		return // the lease lapsed: the next leader writes
	}
	wctx, cancel := context.WithTimeout(ctx, election.RequestTimeout)
	start := time.Now()
	written, err := l.writer.Write(wctx, snap)
	cancel()
	if err != nil {
		if errors.Is(err, ErrSuperseded) {
			c.log.Error("a later leader wrote the snapshot: this node stops writing", "err", err)
		} else if ctx.Err() == nil {
			c.log.Warn("writing the snapshot failed: retrying", "err", err)
		}
		return
	}
	l.mu.Lock()
	changed := l.snap != written
	l.snap = written
	l.mu.Unlock()
	if c.cache.Update(written, now) || changed {
		c.log.Info("snapshot written", "generation", written.Generation, "revision", written.Revision, "took", time.Since(start))
		c.server.Broadcast(&pb.Hint{Kind: pb.Hint_SNAPSHOT_CHANGED, Generation: written.Generation, Revision: written.Revision})
	}
	c.publishView()
}
