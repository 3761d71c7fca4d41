// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"
	"time"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/internal/state"
)

// Pace of the leader's work on the deployment index.
const (
	// IndexPollInterval is how often the leader reads the index: one HEAD
	// (or conditional GET, answered 304) while it is unchanged, a cost that
	// does not grow with the fleet. A change is hinted to every follower
	// at once, before the leader reads the new body, so it bounds how long
	// a commit waits to be noticed (half of it on average).
	IndexPollInterval = 500 * time.Millisecond
	// ViewCheckInterval is how often the leader reads every NodeGroup view
	// (conditionally on the ETag it last found right), so that a view
	// damaged by hand is rewritten even while its NodeGroup does not
	// change. Views of NodeGroups that changed are checked at once.
	ViewCheckInterval = 10 * time.Minute
)

// pollIndex is the leader's index poll: every IndexPoll it reads the
// index's version, and on a new version it hints every follower and its
// own reconciler (before it reads and decodes the new body, naming the
// NodeGroups the new version's metadata does not prove unchanged), marks
// the snapshot dirty (the Services may have changed) and repairs the
// views of the NodeGroups that changed. The first read of a leadership
// hints too: followers may have missed hints while no one led, and skip a
// hint for the version they applied.
func (c *Coordinator) pollIndex(ctx context.Context, l *leaderState) {
	var (
		last    string
		first   = true
		checked time.Time
		failing bool
		hinted  string
		read    IndexVersion // the last version whose body was read
	)
	early := func(etag string, meta state.IndexMeta) {
		if !first && etag != hinted {
			hinted = etag
			changed, proven := changedNodeGroups(read, meta)
			c.hintIndex(IndexVersion{ETag: etag, Meta: meta}, changed, proven)
		}
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, election.RequestTimeout)
		v, err := c.opts.Index.Poll(rctx, early)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				c.indexErrors.report(c.log, "the leader cannot read the deployment index: followers find commits by their own poll", "err", err)
			}
			if !failing {
				// The heartbeats stop vouching for the index: this
				// node's reconciler finds its own pace again.
				failing = true
				c.IndexChanged("")
			}
		default:
			c.indexErrors.reset()
			failing = false
			c.indexPolled(c.clock.Now())
			changed := first || v.ETag != last
			if changed {
				if first || v.ETag != hinted {
					c.hintIndex(v, nil, false)
				} else {
					c.indexSeen.Store(&v)
				}
				hinted = v.ETag
				l.markDirty()
			}
			now := c.clock.Now()
			full := checked.IsZero() || now.Sub(checked) >= c.opts.ViewCheck
			if c.opts.Views != nil && (changed || full) {
				res, err := c.opts.Views.Sync(rctx, v.Index, v.Meta.WriteID(), full)
				switch {
				case err != nil && ctx.Err() == nil:
					c.log.Warn("repairing the NodeGroup views failed: nodes read the index meanwhile", "err", err)
				case err == nil && full:
					checked = now
				}
				if res.Rewritten > 0 {
					c.log.Info("NodeGroup views rewritten to match the index", "etag", v.ETag, "rewritten", res.Rewritten)
				}
			}
			first, last, read = false, v.ETag, v
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-c.clock.After(c.opts.IndexPoll):
		}
	}
}

// hintIndex tells every follower watching this leader, and this node's
// own reconciler, that the index is at version v; when proven, changed
// are the only NodeGroups it may have changed (see changedNodeGroups).
func (c *Coordinator) hintIndex(v IndexVersion, changed []string, proven bool) {
	c.indexSeen.Store(&v)
	c.IndexChanged(v.ETag)
	c.server.Broadcast(&pb.Hint{Kind: pb.Hint_INDEX_CHANGED, IndexEtag: v.ETag, IndexWriteId: v.Meta.WriteID(), IndexPolled: true,
		ChangedNodegroups: changed, NodegroupsProven: proven})
}

// changedNodeGroups lists the NodeGroups of prev (a version whose body
// was read) that meta, the metadata of a newer version, does not prove
// unchanged since prev: proven is false when nothing can be said (no
// previous version or no write IDs). A NodeGroup new in the newer
// version is not listed; its nodes only take a little longer.
func changedNodeGroups(prev IndexVersion, meta state.IndexMeta) (changed []string, proven bool) {
	since := prev.Meta.WriteID()
	if prev.Index == nil || since == "" || meta.WriteID() == "" {
		return nil, false
	}
	for _, ng := range prev.Index.NodeGroups() {
		if !meta.NodeGroup(ng, since).Unchanged {
			changed = append(changed, ng)
		}
	}
	return changed, true
}

// Hinted reports whether the leader's index hints reach this node now: it
// leads and polls the index itself, or its watch on the leader's hint
// stream is established. The reconcile loop polls slowly only then.
func (c *Coordinator) Hinted() bool {
	if c.opts.Index == nil {
		return false
	}
	if c.elector.IsLeader() {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.leader != nil
	}
	return c.watching.Load() > 0
}

// IndexHint implements api.IndexPoller: while this node leads and its
// poll has read the index, a watch starts with that version.
func (c *Coordinator) IndexHint() *pb.Hint {
	v := c.indexSeen.Load()
	if v == nil || !c.elector.IsLeader() {
		return nil
	}
	term, _ := c.elector.Term()
	return &pb.Hint{Kind: pb.Hint_INDEX_CHANGED, IndexEtag: v.ETag, IndexWriteId: v.Meta.WriteID(), IndexPolled: true, Term: term.Record.Term}
}
