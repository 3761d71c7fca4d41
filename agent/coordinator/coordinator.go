// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/agent/identity"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/state"
)

// NodeIdentity is the node's mTLS identity; *identity.Identity is one.
type NodeIdentity interface {
	ServerConfig() *tls.Config
	ClientConfig(peer netip.Addr) *tls.Config
	Peer(cs tls.ConnectionState) (identity.Peer, error)
}

// Options configure a Coordinator.
type Options struct {
	// NodeID and NodeGroup are this node's, as in its identity's SPIFFE
	// URI.
	NodeID, NodeGroup string
	// Advertise is the node's global IPv6 address and API port
	// ([addr]:8081), published in the lease while it leads. Its address
	// must be the identity's IP SAN.
	Advertise netip.AddrPort
	// Listener, when set, is where the API is served; otherwise the
	// coordinator listens on Advertise.
	Listener net.Listener
	// Dial opens connections to other nodes; nil dials TCP. Local node
	// mode passes api.LoopbackDial.
	Dial api.DialFunc
	// PodPrefix is this node's canonical Pod /80.
	PodPrefix netip.Prefix
	// Store is the cluster bucket.
	Store Store
	// Identity is the node's mTLS identity.
	Identity NodeIdentity
	// Services returns the namespaced Services of the deployment index
	// with the NodeGroup defining each; the leader gives DNS identities to
	// exactly these and accepts endpoints for each only from nodes of its
	// NodeGroup. Nil means the Services that have endpoints, from any node.
	Services func(ctx context.Context) ([]IndexService, error)
	// OnView receives the snapshot DNS and the dataplane should use,
	// whenever it changes (also when a lapsed lease clears backends).
	OnView func(*pb.ServiceSnapshot)
	// AppliedByCaller says that the OnView receiver calls Applied once
	// Service DNS and the dataplane hold a view; otherwise a view counts
	// as applied when OnView returns.
	AppliedByCaller bool
	// OnRefused is told when the leader refuses this node's claim (a node
	// ID another live agent holds, another node's address or Pod prefix)
	// and why, and with nil once it accepts it again: a refused node's
	// endpoints are not served.
	OnRefused func(error)
	// OnIndexHint is told that deployments/index.json changed, so the
	// reconciler can start at once; polling stays the correctness path.
	// The ETag names the new version ("" when unknown).
	OnIndexHint func(etag string)
	// Index, when set, is the deployment index as this node reads it.
	// While the node leads it polls it every IndexPoll, hints every
	// follower (and OnIndexHint) when its version changes, keeps the
	// NodeGroup views with Views, and takes the Services from it unless
	// Services is set.
	Index *IndexCache
	// Views keeps the NodeGroup views while this node leads; nil leaves
	// them to the committers.
	Views *state.ViewKeeper
	// IndexPoll and ViewCheck default to IndexPollInterval and
	// ViewCheckInterval.
	IndexPoll, ViewCheck time.Duration
	// Kubelet tells whether the node follows a kubelet Pods API; without
	// one its Pods' readiness is unknown and rollouts pace it on applied
	// revisions.
	Kubelet bool
	// OnSlotFreed is told that a rollout slot freed, so the reconcile loop
	// asks again for the updates it holds.
	OnSlotFreed func()
	// SlotTimeout, LeaderlessAfter and LeaderlessStep default to
	// SlotTimeout, LeaderlessAfter and LeaderlessStep; tests shorten them.
	SlotTimeout, LeaderlessAfter, LeaderlessStep time.Duration
	// Drain is how long a Pod whose endpoints a rollout slot withdrew
	// keeps running after every live node applied the withdrawal; zero
	// means DefaultDrain, negative none.
	Drain time.Duration
	// ProbelessHold is how long kubelet must have reported a Pod with a
	// container without a readiness probe ready before this node reports
	// it ready; zero means ProbelessHold, negative takes kubelet's word at
	// once (tests whose fake kubelet has no clock).
	ProbelessHold time.Duration
	// NodeRegistry returns the address of the node's registry while this
	// agent serves it ("" otherwise, or nil without one). A Pod whose
	// image pull failed at connecting to it failed while the agent was
	// down: kubelet pulls again and reaches it, so that is reported as a
	// Pod that is not ready yet, not as a failure of the revision.
	NodeRegistry func() string
	// Clock, Timing and Retention default to the real clock, the
	// election's defaults and Retention; tests shorten them.
	Clock     election.Clock
	Timing    election.Timing
	Retention time.Duration
	// Log receives transitions; nil discards them.
	Log *slog.Logger
}

// Coordinator runs one node's share of coordination: the election, the
// coordination API, the leader's snapshots and the follower's reports.
type Coordinator struct {
	opts    Options
	clock   election.Clock
	timing  election.Timing
	log     *slog.Logger
	elector *election.Elector
	server  *api.Server
	cache   *Cache
	kick    chan struct{}
	// holdKick tells the hold timer (Run) that the earliest end of a
	// readiness hold changed; gateKick tells the Gate's timer that the
	// earliest ask it wants changed; confirmKick tells the follower that
	// this node applied another snapshot.
	holdKick, gateKick, confirmKick chan struct{}
	// leadership runs each leadership's work (leader.go); Run waits for it,
	// so no write of a leadership outlives the coordinator.
	leadership sync.WaitGroup

	mu       sync.Mutex
	services []staticpod.Service
	pods     []*corev1.Pod
	local    []Endpoint
	leader   *leaderState
	lastView *pb.ServiceSnapshot
	// draining is set by Drain: this node's endpoints stay withdrawn.
	draining bool
	// refusals logs the leader's refusals of this node's Hello.
	refusals errorLog
	// indexErrors logs the leader's failures to read the index.
	indexErrors errorLog
	// watching counts the established watches of a leader that polls the
	// index (see Hinted).
	watching atomic.Int32
	// indexSeen is the last index version the leader's poll read, for the
	// first message of a watch.
	indexSeen atomic.Pointer[IndexVersion]
	// beats is the leader's heartbeats as heard (heartbeat.go).
	beats beatState
	// node is this node's share of observed state and rolling updates
	// (nodestatus.go, gate.go); sizes the NodeGroups' configured sizes
	// the leader reads.
	node  nodeSide
	sizes *clusterSizes
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// New checks the options.
func New(opts Options) (*Coordinator, error) {
	if opts.NodeID == "" || opts.Store == nil || opts.Identity == nil {
		return nil, errors.New("coordinator: a node ID, a store and an identity are required")
	}
	if _, err := api.ParsePodPrefix(opts.PodPrefix.String()); err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	if !opts.Advertise.IsValid() {
		return nil, errors.New("coordinator: no advertised address: pass the node's [IPv6]:8081")
	}
	c := &Coordinator{opts: opts, clock: opts.Clock, timing: opts.Timing, log: opts.Log, kick: make(chan struct{}, 1),
		holdKick: make(chan struct{}, 1), gateKick: make(chan struct{}, 1), confirmKick: make(chan struct{}, 1)}
	if c.clock == nil {
		c.clock = realClock{}
	}
	if c.timing == (election.Timing{}) {
		c.timing = election.DefaultTiming()
	}
	if c.opts.Retention == 0 {
		c.opts.Retention = Retention
	}
	if c.opts.IndexPoll <= 0 {
		c.opts.IndexPoll = IndexPollInterval
	}
	if c.opts.ViewCheck <= 0 {
		c.opts.ViewCheck = ViewCheckInterval
	}
	if c.opts.Index != nil && c.opts.Services == nil {
		// The poll keeps the cache current: a publish needs no request.
		c.opts.Services = servicesFrom(c.opts.Index, 2*c.opts.IndexPoll)
	}
	c.opts.SlotTimeout = cmp.Or(c.opts.SlotTimeout, SlotTimeout)
	c.opts.LeaderlessAfter = cmp.Or(c.opts.LeaderlessAfter, LeaderlessAfter)
	c.opts.LeaderlessStep = cmp.Or(c.opts.LeaderlessStep, LeaderlessStep)
	c.opts.ProbelessHold = cmp.Or(c.opts.ProbelessHold, ProbelessHold)
	c.opts.Drain = cmp.Or(c.opts.Drain, DefaultDrain)
	c.node = newNodeSide()
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	// The election names the node in its own log lines.
	elog := c.log
	c.log = c.log.With("node", opts.NodeID)
	c.cache = NewCache(c.opts.Retention)
	c.sizes = &clusterSizes{store: opts.Store, log: c.log.Warn}
	c.server = api.NewServer(opts.Identity.ServerConfig(), opts.Identity, c, c.log)
	el, err := election.New(election.Options{
		ID: opts.NodeID, Addr: opts.Advertise.String(), Store: opts.Store, Clock: c.clock, Timing: c.timing, Log: elog,
		OnAcquire: c.acquire,
		OnLose:    c.lose,
		OnObserve: func(election.Record) { c.poke() },
		Quiet:     c.quiet,
	})
	if err != nil {
		return nil, err
	}
	c.elector = el
	return c, nil
}

// Elector exposes the election, for health and tests.
func (c *Coordinator) Elector() *election.Elector { return c.elector }

// SetEndpoints replaces this node's ready endpoints (from the kubelet
// Pods API watcher). Each must lie in the node's Pod /80.
func (c *Coordinator) SetEndpoints(eps []Endpoint) error {
	for _, e := range eps {
		if !c.opts.PodPrefix.Contains(e.Addr) {
			return fmt.Errorf("endpoint %s of %s/%s is outside this node's Pod prefix %s", e.Addr, e.Service.Namespace, e.Service.Name, c.opts.PodPrefix)
		}
	}
	c.mu.Lock()
	if c.draining {
		c.mu.Unlock()
		return nil // the node is leaving: its endpoints stay withdrawn
	}
	c.local = append([]Endpoint(nil), eps...)
	c.node.endpointsSet = true
	l := c.leader
	c.mu.Unlock()
	if l != nil {
		l.report(c.opts.NodeID, eps, c.clock.Now())
	}
	c.poke()
	return nil
}

// View returns the snapshot DNS and the dataplane should use now.
func (c *Coordinator) View() *pb.ServiceSnapshot { return c.cache.View(c.clock.Now()) }

// Restore installs the durable snapshot's Service identities, without
// backends, before the first leader is heard (startup order).
func (c *Coordinator) Restore(ctx context.Context) error {
	s, err := LoadDurable(ctx, c.opts.Store)
	if err != nil {
		return err
	}
	// A leadership of this node must claim a term above the stored one.
	c.elector.RaiseTerm(s.GetTerm())
	c.cache.Restore(s)
	c.publishView()
	return nil
}

// NotifyIndexChanged tells every node, best effort, that the deployment
// index changed: directly when this node leads, through the leader
// otherwise.
func (c *Coordinator) NotifyIndexChanged(ctx context.Context, etag string) error {
	if c.elector.IsLeader() {
		c.IndexChanged(etag)
		c.server.Broadcast(&pb.Hint{Kind: pb.Hint_INDEX_CHANGED, IndexEtag: etag})
		return nil
	}
	rec, ok := c.elector.Leader()
	if !ok {
		return errors.New("no leader is known: followers find the change at their next poll")
	}
	cl, err := api.Dial(rec.LeaderAddr, rec.LeaderID, c.opts.Identity, c.opts.Dial)
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = cl.NotifyIndexChanged(ctx, &pb.NotifyRequest{IndexEtag: etag})
	return err
}

// Run serves the API, takes part in the election and keeps the view
// current until ctx ends; then it resigns if it leads and returns.
func (c *Coordinator) Run(ctx context.Context) error {
	lis := c.opts.Listener
	if lis == nil {
		var err error
		lis, err = net.Listen("tcp", c.opts.Advertise.String())
		if err != nil {
			return fmt.Errorf("coordination API: %w", err)
		}
	}
	var wg sync.WaitGroup
	serveErr := make(chan error, 1)
	wg.Go(func() { serveErr <- c.server.Serve(lis) })
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { _ = c.elector.Run(ectx) })
	wg.Go(func() { c.follow(ectx) })
	wg.Go(func() { c.endHolds(ectx) })
	wg.Go(func() { c.askAgainLoop(ectx) })
	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		if err != nil {
			err = fmt.Errorf("coordination API: %w", err)
		}
	}
	cancel()
	// The elector resigns first so a follower can take over while this
	// node's API closes.
	c.server.Stop()
	wg.Wait()
	c.leadership.Wait()
	return err
}

func (c *Coordinator) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// publishView hands the current view to OnView when it changed.
func (c *Coordinator) publishView() {
	v := c.cache.View(c.clock.Now())
	c.mu.Lock()
	same := v != nil && c.lastView != nil && proto.Equal(v, c.lastView)
	if !same {
		c.lastView = v
	}
	c.mu.Unlock()
	if same || v == nil {
		return
	}
	if c.opts.OnView != nil {
		c.opts.OnView(v)
	}
	if !c.opts.AppliedByCaller {
		c.Applied(v)
	}
}

// Leader implements api.Backend.
func (c *Coordinator) Leader() (api.Leader, bool) {
	rec, _ := c.elector.Leader()
	return api.Leader{ID: rec.LeaderID, Addr: rec.LeaderAddr}, c.elector.IsLeader()
}

// Snapshot implements api.Backend.
func (c *Coordinator) Snapshot(context.Context) (*pb.ServiceSnapshot, error) {
	l, err := c.leading()
	if err != nil {
		return nil, err
	}
	s := l.current()
	if s == nil {
		return nil, errors.New("the leader has not written its first snapshot yet")
	}
	return s, nil
}

// IndexChanged implements api.Backend.
func (c *Coordinator) IndexChanged(etag string) {
	if c.opts.OnIndexHint != nil {
		c.opts.OnIndexHint(etag)
	}
}

// Drain takes this node's endpoints out of the cluster's snapshot before
// the node stops (SIGTERM): they stay withdrawn, and a follower asks the
// leader to Leave and waits until the leader wrote a snapshot without
// them; a leader writes that snapshot itself before it resigns. It is
// bounded by ctx; a node that cannot drain leaves its endpoints to expire
// after the lease window.
func (c *Coordinator) Drain(ctx context.Context) error {
	c.mu.Lock()
	c.draining, c.local = true, nil
	l := c.leader
	c.mu.Unlock()
	if l != nil && c.elector.IsLeader() {
		written, err := c.publish(ctx, l, false)
		if err != nil {
			return fmt.Errorf("drain: write the snapshot without this node's endpoints: %w", err)
		}
		c.log.Info("drained: the snapshot without this node's endpoints is written", "term", written.Term, "generation", written.Generation, "revision", written.Revision)
		return nil
	}
	rec, ok := c.elector.Leader()
	if !ok {
		return errors.New("drain: no leader is known: this node's endpoints expire from the snapshot after the lease window")
	}
	cl, err := api.Dial(rec.LeaderAddr, rec.LeaderID, c.opts.Identity, c.opts.Dial)
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	defer cl.Close()
	resp, err := cl.Leave(ctx, &pb.LeaveRequest{})
	if err != nil {
		return fmt.Errorf("drain: leader %s: %w", rec.LeaderID, err)
	}
	c.log.Info("drained: the leader wrote a snapshot without this node's endpoints", "leader", rec.LeaderID,
		"term", resp.GetTerm(), "generation", resp.GetGeneration(), "revision", resp.GetRevision())
	return nil
}

// Status is the coordinator's state for the agent's metrics.
type Status struct {
	// Leading reports whether this node leads; Term is the lease term it
	// holds or last observed.
	Leading bool
	Term    uint64
	// Snapshot is the snapshot DNS and the dataplane use (nil before any)
	// and Confirmed when a leader last confirmed it.
	Snapshot  *pb.ServiceSnapshot
	Confirmed time.Time
}

// Status returns the coordinator's state now.
func (c *Coordinator) Status() Status {
	term, leading := c.elector.Term()
	rec, _ := c.elector.Leader()
	snap, confirmed := c.cache.Snapshot()
	return Status{Leading: leading, Term: max(term.Record.Term, rec.Term), Snapshot: snap, Confirmed: confirmed}
}
