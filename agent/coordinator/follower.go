// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"
	"time"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator/election"
)

// leaderLink is a follower's connection to one leader.
type leaderLink struct {
	leader election.Record
	client *api.Client
	hello  bool
	stop   context.CancelFunc
}

func (s *leaderLink) close() {
	if s != nil {
		s.stop()
		s.client.Close()
	}
}

// follow keeps, while this node does not lead, a link with the leader:
// Hello, the node's endpoints and the leader's snapshot every renew
// interval or at once on a hint, plus a watch for the leader's hints. It
// also republishes the view so a lapsed lease clears backends on time.
func (c *Coordinator) follow(ctx context.Context) {
	var s *leaderLink
	defer func() { s.close() }()
	var lastSync time.Time
	for {
		kicked := false
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
			kicked = true
		case <-c.clock.After(min(c.timing.Retry, c.opts.Retention/4)):
		}
		rec, known := c.elector.Leader()
		switch {
		case c.elector.IsLeader() || !known || rec.LeaderID == c.opts.NodeID:
			s.close()
			s = nil
		default:
			if s == nil || s.leader.LeaderID != rec.LeaderID || s.leader.LeaderAddr != rec.LeaderAddr {
				s.close()
				s = c.connect(ctx, rec)
				kicked = true
			}
			if s != nil && (kicked || c.clock.Now().Sub(lastSync) >= c.timing.Renew) {
				lastSync = c.clock.Now()
				c.sync(ctx, s)
			}
		}
		c.publishView()
	}
}

func (c *Coordinator) connect(ctx context.Context, rec election.Record) *leaderLink {
	cl, err := api.Dial(rec.LeaderAddr, rec.LeaderID, c.opts.Identity, c.opts.Dial)
	if err != nil {
		c.log.Warn("cannot reach the leader", "leader", rec.LeaderID, "err", err)
		return nil
	}
	wctx, stop := context.WithCancel(ctx)
	s := &leaderLink{leader: rec, client: cl, stop: stop}
	go c.watch(wctx, cl)
	return s
}

// sync reports this node's endpoints and fetches the snapshot.
func (c *Coordinator) sync(ctx context.Context, s *leaderLink) {
	ctx, cancel := context.WithTimeout(ctx, election.RequestTimeout)
	defer cancel()
	if !s.hello {
		if _, err := s.client.Hello(ctx, &pb.HelloRequest{PodPrefix: c.opts.PodPrefix.String()}); err != nil {
			c.log.Warn("hello to the leader failed", "leader", s.leader.LeaderID, "err", err)
			return
		}
		s.hello = true
	}
	c.mu.Lock()
	local := c.local
	c.mu.Unlock()
	rep := &pb.EndpointReport{}
	for _, e := range local {
		rep.Endpoints = append(rep.Endpoints, &pb.ReportedEndpoint{Namespace: e.Service.Namespace, Service: e.Service.Name, Address: e.Addr.String()})
	}
	if _, err := s.client.ReportEndpoints(ctx, rep); err != nil {
		s.hello = false // a new leader process forgets prefixes
		c.log.Warn("reporting endpoints failed", "leader", s.leader.LeaderID, "err", err)
		return
	}
	snap, err := s.client.Snapshot(ctx, &pb.SnapshotRequest{})
	if err != nil {
		c.log.Warn("fetching the snapshot failed", "leader", s.leader.LeaderID, "err", err)
		return
	}
	c.cache.Update(snap, c.clock.Now())
}

// watch relays the leader's hints until the link ends.
func (c *Coordinator) watch(ctx context.Context, cl *api.Client) {
	for ctx.Err() == nil {
		stream, err := cl.Watch(ctx, &pb.WatchRequest{})
		if err == nil {
			for {
				h, rerr := stream.Recv()
				if rerr != nil {
					break
				}
				switch h.Kind {
				case pb.Hint_INDEX_CHANGED:
					c.IndexChanged(h.IndexEtag)
				case pb.Hint_SNAPSHOT_CHANGED:
					c.poke()
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-c.clock.After(c.timing.Retry):
		}
	}
}
