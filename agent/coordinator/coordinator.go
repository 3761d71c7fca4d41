// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/agent/identity"
	"podmin.dev/podmin/agent/staticpod"
)

// NodeIdentity is the node's mTLS identity; *identity.Identity is one.
type NodeIdentity interface {
	ServerConfig() *tls.Config
	ClientConfig(peer netip.Addr) *tls.Config
	Peer(cs tls.ConnectionState) (identity.Peer, error)
}

// Options configure a Coordinator.
type Options struct {
	// NodeID is this node's ID, as in its identity's SPIFFE URI.
	NodeID string
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
	// Services returns the namespaced Services of the deployment index; the
	// leader gives DNS identities to exactly these. Nil means the Services
	// that have endpoints.
	Services func(ctx context.Context) ([]ServiceID, error)
	// OnView receives the snapshot DNS and the dataplane should use,
	// whenever it changes (also when a lapsed lease clears backends).
	OnView func(*pb.ServiceSnapshot)
	// OnIndexHint is told that deployments/index.json changed, so the
	// reconciler can start at once; polling stays the correctness path.
	OnIndexHint func(etag string)
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

	mu       sync.Mutex
	services []staticpod.Service
	pods     []*corev1.Pod
	local    []Endpoint
	leader   *leaderState
	lastView *pb.ServiceSnapshot
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
	c := &Coordinator{opts: opts, clock: opts.Clock, timing: opts.Timing, log: opts.Log, kick: make(chan struct{}, 1)}
	if c.clock == nil {
		c.clock = realClock{}
	}
	if c.timing == (election.Timing{}) {
		c.timing = election.DefaultTiming()
	}
	if c.opts.Retention == 0 {
		c.opts.Retention = Retention
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.log = c.log.With("node", opts.NodeID)
	c.cache = NewCache(c.opts.Retention)
	c.server = api.NewServer(opts.Identity.ServerConfig(), opts.Identity, c, c.log)
	el, err := election.New(election.Options{
		ID: opts.NodeID, Addr: opts.Advertise.String(), Store: opts.Store, Clock: c.clock, Timing: c.timing, Log: c.log,
		OnAcquire: c.acquire,
		OnLose:    c.lose,
		OnObserve: func(election.Record) { c.poke() },
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
	c.local = append([]Endpoint(nil), eps...)
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
	if !same && v != nil && c.opts.OnView != nil {
		c.opts.OnView(v)
	}
}

// Leader implements api.Backend.
func (c *Coordinator) Leader() (api.Leader, bool) {
	rec, _ := c.elector.Leader()
	return api.Leader{ID: rec.LeaderID, Addr: rec.LeaderAddr}, c.elector.IsLeader()
}

// Report implements api.Backend.
func (c *Coordinator) Report(_ context.Context, nodeID string, eps []api.Endpoint) (uint64, uint64, error) {
	c.mu.Lock()
	l := c.leader
	c.mu.Unlock()
	if l == nil {
		return 0, 0, errors.New("this node does not lead")
	}
	out := make([]Endpoint, len(eps))
	for i, e := range eps {
		out[i] = Endpoint{Service: ServiceID{Namespace: e.Namespace, Name: e.Service}, Addr: e.Addr}
	}
	l.report(nodeID, out, c.clock.Now())
	gen, rev := l.position()
	return gen, rev, nil
}

// Snapshot implements api.Backend.
func (c *Coordinator) Snapshot(context.Context) (*pb.ServiceSnapshot, error) {
	c.mu.Lock()
	l := c.leader
	c.mu.Unlock()
	if l == nil {
		return nil, errors.New("this node does not lead")
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
