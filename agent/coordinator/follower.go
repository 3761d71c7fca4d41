// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	// confirmed is the applied snapshot last confirmed to this leader.
	confirmed api.Position
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
		case <-c.confirmKick:
		case <-c.clock.After(min(c.timing.Retry, c.opts.Retention/4)):
		}
		rec, known := c.elector.Leader()
		c.mu.Lock()
		draining := c.draining
		c.mu.Unlock()
		switch {
		case c.elector.IsLeader() || !known || draining || rec.LeaderID == c.opts.NodeID && rec.LeaderAddr == c.opts.Advertise.String():
			s.close()
			s = nil
		default:
			if s == nil || s.leader.LeaderID != rec.LeaderID || s.leader.LeaderAddr != rec.LeaderAddr {
				s.close()
				s = c.connect(ctx, rec)
				kicked = true
			} else if s.leader.Term != rec.Term {
				// The same node leads again under a new term (its agent
				// restarted): the new leadership knows no registration
				// and waits for this node's report before it paces
				// rollouts.
				s.leader, s.hello, s.confirmed, kicked = rec, false, api.Position{}, true
			}
			if s != nil && (kicked || c.clock.Now().Sub(lastSync) >= c.timing.Renew) {
				lastSync = c.clock.Now()
				c.sync(ctx, s)
			}
			if s != nil {
				c.sendApplied(ctx, s)
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
	go c.watch(wctx, cl, rec.LeaderID)
	return s
}

// sync reports this node's endpoints and fetches the snapshot.
func (c *Coordinator) sync(ctx context.Context, s *leaderLink) {
	ctx, cancel := context.WithTimeout(ctx, election.RequestTimeout)
	defer cancel()
	if !s.hello {
		_, err := s.client.Hello(ctx, &pb.HelloRequest{PodPrefix: c.opts.PodPrefix.String(), NodeId: c.opts.NodeID, Address: c.opts.Advertise.Addr().String()})
		if status.Code(err) == codes.PermissionDenied {
			c.refused(s.leader.LeaderID, err)
			return
		}
		if err != nil {
			c.log.Warn("hello to the leader failed", "leader", s.leader.LeaderID, "err", err)
			return
		}
		s.hello = true
	}
	// A slot request (gate.go) withdraws endpoints: no report of the
	// endpoints from before it may overtake it. Until this node knows its
	// endpoints (its kubelet has not listed its Pods since the agent
	// started), it reports none, so the leader keeps the ones its Pods
	// serve.
	c.node.sendMu.Lock()
	c.mu.Lock()
	local, known := c.local, c.localKnown()
	c.mu.Unlock()
	var resp *pb.ReportResponse
	var err error
	if known {
		rep := &pb.EndpointReport{}
		for _, e := range local {
			rep.Endpoints = append(rep.Endpoints, &pb.ReportedEndpoint{Namespace: e.Service.Namespace, Service: e.Service.Name, Address: e.Addr.String()})
		}
		resp, err = s.client.ReportEndpoints(ctx, rep)
	}
	c.node.sendMu.Unlock()
	if status.Code(err) == codes.PermissionDenied {
		s.hello = false
		c.refused(s.leader.LeaderID, err)
		return
	}
	if err != nil {
		s.hello = false // a new leader process forgets registrations
		c.log.Warn("reporting endpoints failed", "leader", s.leader.LeaderID, "err", err)
		return
	}
	c.accepted()
	if len(resp.GetRefused()) > 0 {
		c.log.Warn("the leader refused endpoints of Services this node's NodeGroup does not define", "leader", s.leader.LeaderID, "refused", resp.GetRefused())
	}
	c.sendStatus(ctx, s)
	snap, err := s.client.Snapshot(ctx, &pb.SnapshotRequest{})
	if err != nil {
		c.log.Warn("fetching the snapshot failed", "leader", s.leader.LeaderID, "err", err)
		return
	}
	if snap.GetLeaderId() == s.leader.LeaderID && snap.GetTerm() == s.leader.Term {
		// The leadership the lease names now: adopted whatever this node
		// remembers, so a reset lease history never freezes it.
		c.cache.Adopt(snap, c.clock.Now())
		return
	}
	c.cache.Update(snap, c.clock.Now())
}

// watch relays the leader's hints until the link ends. While a watch of
// a leader that polls the index lasts, this node counts as hinted; when it
// ends, a pass runs at once, since hints may have been missed. Heartbeats
// are recorded (heartbeat.go); a heartbeat naming an index version the
// watch has not named before is a hint of it, and one that no longer
// vouches for a version wakes the reconciler, whose safety poll then
// speeds up. Once heartbeats arrive, a watch that hears nothing for the
// loss bound is ended, as if the link broke.
func (c *Coordinator) watch(ctx context.Context, cl *api.Client, leader string) {
	for ctx.Err() == nil {
		sctx, cancel := context.WithCancel(ctx)
		stream, err := cl.Watch(sctx, &pb.WatchRequest{})
		polled, beating := false, false
		if err == nil {
			heard := make(chan struct{}, 1)
			go c.watchdog(sctx, cancel, heard)
			var named string // the index version this watch named last
			for {
				h, rerr := stream.Recv()
				if rerr != nil {
					break
				}
				if h.IndexPolled && !polled {
					polled = true
					c.watching.Add(1)
				}
				if h.GetTerm() != 0 {
					c.heard(leader, h)
					beating = true
					select {
					case heard <- struct{}{}:
					default:
					}
				}
				switch h.Kind {
				case pb.Hint_INDEX_CHANGED:
					named = h.IndexEtag
					c.indexHint(ctx, h)
				case pb.Hint_HEARTBEAT:
					etag := ""
					if h.IndexPolled {
						etag = h.IndexEtag
					}
					if etag != named {
						named = etag
						c.IndexChanged(etag)
					}
				case pb.Hint_SNAPSHOT_CHANGED:
					c.poke()
				case pb.Hint_SLOT_FREED:
					c.slotFreed()
				case pb.Hint_WITHDRAWN:
					if h.GetNodeId() == c.opts.NodeID {
						c.slotFreed()
					}
				}
			}
		}
		cancel()
		if beating {
			c.unheard()
		}
		if polled {
			c.watching.Add(-1)
			c.IndexChanged("")
		}
		select {
		case <-ctx.Done():
		case <-c.clock.After(c.timing.Retry):
		}
	}
}

// UnrelatedSpread is how long nodes of a NodeGroup a commit provably
// left unchanged spread their passes after its hint, so the nodes of the
// NodeGroups it changed are not queued behind the whole fleet's reads.
const UnrelatedSpread = time.Second

// indexHint relays an index hint to the reconciler: at once, or after a
// random part of UnrelatedSpread when the leader proved that the version
// left this node's NodeGroup unchanged (the pass still checks).
func (c *Coordinator) indexHint(ctx context.Context, h *pb.Hint) {
	if !h.GetNodegroupsProven() || slices.Contains(h.GetChangedNodegroups(), c.opts.NodeGroup) {
		c.IndexChanged(h.GetIndexEtag())
		return
	}
	wait := rand.N(UnrelatedSpread)
	go func() {
		select {
		case <-ctx.Done():
		case <-c.clock.After(wait):
			c.IndexChanged(h.GetIndexEtag())
		}
	}()
}

// watchdog ends a watch (cancel) when, after its first heartbeat, none
// arrives on heard within the loss bound.
func (c *Coordinator) watchdog(ctx context.Context, cancel context.CancelFunc, heard <-chan struct{}) {
	var timeout <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-heard:
			timeout = c.clock.After(c.beatLoss())
		case <-timeout:
			c.log.Warn("the leader's heartbeats stopped: reading the lease and the index again", "after", c.beatLoss())
			cancel()
			return
		}
	}
}

// errorLog logs a repeating error at ERROR when it is new or a minute
// after it was last logged, and at DEBUG in between, so a misconfiguration
// is loud without flooding the log every renew interval.
type errorLog struct {
	mu   sync.Mutex
	last string
	at   time.Time
}

func (e *errorLog) report(log *slog.Logger, msg string, args ...any) {
	key := msg
	for _, a := range args {
		if err, ok := a.(error); ok {
			key += err.Error()
		}
	}
	e.mu.Lock()
	loud := key != e.last || time.Since(e.at) >= time.Minute
	if loud {
		e.last, e.at = key, time.Now()
	}
	e.mu.Unlock()
	level := slog.LevelDebug
	if loud {
		level = slog.LevelError
	}
	log.Log(context.Background(), level, msg, args...)
}

func (e *errorLog) reset() {
	e.mu.Lock()
	e.last = ""
	e.mu.Unlock()
}
