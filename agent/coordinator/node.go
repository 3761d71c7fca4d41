// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/daemon"
	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/agent/identity"
	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/state"
)

// Component names the node's coordination wiring reports readiness under.
const (
	componentCoordination = "coordination"
	// componentRefused names, in /readyz, the leader's refusal of this
	// node's claim (a node ID another live agent holds, say).
	componentRefused   = "coordination identity"
	componentDNS       = "service-dns"
	componentDataplane = "dataplane"
)

// Node is the agent's share of cluster coordination: its mTLS identity,
// the Coordinator (election, coordination API, snapshots), the Service
// DNS server and the dataplane, both fed from the coordinator's view. Any
// part may be missing: Pod publication never depends on it.
type Node struct {
	log    *slog.Logger
	nodeID string
	coord  *Coordinator
	dns    *service.Server
	feed   *dataplaneFeed
	// restoring is set while the durable snapshot is restored: the views
	// published meanwhile come from storage, not from a leader.
	restoring atomic.Bool
	// health receives what keeps the node from persisting its state.
	health *health.Health
	opts   NodeOptions

	// hint hands the leader's index hints to the reconcile loop; set once
	// the loop exists, before anything runs.
	hint func(etag string)
}

// NewNode assembles the node's coordination. It returns nil (and logs
// why) when the cluster has no CA yet or the node cannot take part;
// opts.Health carries the reasons that need an operator. Only a failure to
// read an existing CA stops the agent, as for the workload CA key.
func NewNode(ctx context.Context, opts NodeOptions) (*Node, error) {
	opts.defaults()
	r, store, hl, log := opts.Secrets, opts.Store, opts.Health, opts.Log
	if r == nil {
		log.Warn("coordination, Service DNS and the dataplane disabled: the Podmin data directory holding the local secrets store is unknown; set XDG_DATA_HOME")
		return nil, nil
	}
	ca, err := identity.ReadClusterCA(ctx, r, opts.Cluster)
	if errors.Is(err, secrets.ErrNotFound) {
		log.Warn("coordination, Service DNS and the dataplane disabled until the agent restarts: the cluster has no cluster CA yet", "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	disable := func(err error) (*Node, error) {
		log.Error("coordination disabled: Pods are still published", "err", err)
		hl.Report(componentCoordination, err)
		return nil, nil
	}
	lis, advertise, nodeID, dial, err := listenAPI(opts)
	if err != nil {
		return disable(err)
	}
	clog := log.With("component", "coordinator")
	id, err := identity.New(identity.Options{CA: ca, Cluster: opts.Cluster, NodeGroup: opts.NodeGroup, NodeID: nodeID,
		Addr: advertise.Addr(), Log: clog})
	if err != nil {
		_ = lis.Close()
		return disable(err)
	}
	c := &Node{log: log, nodeID: nodeID, health: hl, opts: opts}
	if opts.DNSAddr != "" {
		c.dns = service.New(service.Config{Addr: opts.DNSAddr, Cluster: opts.Cluster,
			StatePath: filepath.Join(opts.Root, filepath.FromSlash(service.DefaultStatePath)),
			ZonePath:  filepath.Join(opts.Root, filepath.FromSlash(service.DefaultZonePath)), Log: log.With("component", "dns")})
	}
	c.feed = newDataplaneFeed(opts, advertise.Addr(), log.With("component", componentDataplane))
	copts := Options{
		NodeID: nodeID, NodeGroup: opts.NodeGroup, Advertise: advertise, Listener: lis,
		PodPrefix: opts.PodPrefix, Store: store, Identity: id,
		// The leader polls the index, hints every node, takes the
		// Services from it and keeps the NodeGroup views.
		Index:  NewIndexCache(store),
		Views:  state.NewViewKeeper(store),
		OnView: c.view,
		// A view counts as applied once DNS and the dataplane hold it
		// (view, dataplaneFeed.run): a rollout slot's Pod stops only
		// after every live node confirmed that.
		AppliedByCaller: true,
		OnRefused:       func(err error) { hl.Report(componentRefused, err) },
		OnIndexHint:     func(etag string) { c.hint(etag) },
		OnSlotFreed:     func() { c.hint("") },
		SlotTimeout:     opts.SlotTimeout, ProbelessHold: opts.ProbelessHold, Drain: opts.Drain,
		Kubelet: opts.Kubelet, NodeRegistry: opts.NodeRegistry,
		Log: clog, Dial: dial,
	}
	c.coord, err = New(copts)
	if err != nil {
		_ = lis.Close()
		return disable(err)
	}
	c.feed.confirmed = func() time.Time { return c.coord.Status().Confirmed }
	c.feed.applied = c.coord.Applied
	log.Info("coordination enabled", "node", nodeID, "advertise", advertise.String(), "api", lis.Addr().String())
	return c, nil
}

// view receives each snapshot the coordinator settles on: every Service
// gets its DNS identity whatever its readiness, and the dataplane gets
// the VIPs with their ready backends. The coordinator learns that the
// node applied it once DNS serves it and the dataplane programmed it
// (without a dataplane, once DNS serves it).
func (c *Node) view(s *pb.ServiceSnapshot) {
	served := true
	if c.dns != nil {
		var svcs []service.Service
		for _, svc := range s.GetServices() {
			svcs = append(svcs, service.Identity(c.dnsCluster(), svc.Namespace, svc.Name))
		}
		err := c.dns.Update(svcs)
		if err != nil {
			c.log.Error("service DNS update", "err", err)
		}
		// Records served but not on disk leave CoreDNS answering old ones
		// while the agent is down, and a restart with none: the node
		// cannot persist its state, so it is not ready.
		if errors.Is(err, service.ErrNotPersisted) {
			c.health.Report(componentDNSState, err)
		} else if err == nil {
			c.health.Report(componentDNSState, nil)
		}
		served = err == nil || errors.Is(err, service.ErrNotPersisted)
	}
	if c.feed.enabled() {
		c.feed.setView(s, c.restoring.Load())
	} else if served && c.coord != nil {
		c.coord.Applied(s)
	}
}

func (c *Node) dnsCluster() string { return c.feed.cluster }

// Publisher is the static-Pod reconciler's Publisher: the coordinator,
// and extra (tests) when set.
func (c *Node) Publisher(extra staticpod.Publisher) staticpod.Publisher {
	if extra == nil {
		return c.coord
	}
	return publishers{c.coord, extra}
}

type publishers []staticpod.Publisher

func (p publishers) PublishServices(ctx context.Context, services []staticpod.Service) error {
	var errs []error
	for _, x := range p {
		errs = append(errs, x.PublishServices(ctx, services))
	}
	return errors.Join(errs...)
}

// KubeletLost tells the coordinator kubelet stopped answering: the
// readiness of the node's Pods is unknown until it answers again. A nil
// Node ignores it.
func (c *Node) KubeletLost(err error) {
	if c != nil {
		c.coord.KubeletLost(err)
	}
}

// PodsChanged is the kubelet Pods watcher's refresh: the node's ready
// endpoints, and the dataplane's interfaces. A nil Node ignores it.
func (c *Node) PodsChanged(ps []*corev1.Pod) {
	if c == nil {
		return
	}
	c.coord.PodsChanged(ps)
	c.feed.refresh()
}

// Serving returns the components that serve, in start order: Service DNS
// (after the durable snapshot is restored), the dataplane, then the
// coordinator, which discovers the leader. They stop in reverse order
// after the DNS TTL margin: the coordinator resigns first and the
// dataplane is released before DNS stops (a pinned one with Services
// stays attached for the next agent).
func (c *Node) Serving() []daemon.Component {
	out := []daemon.Component{&dnsComponent{c: c, health: c.health}}
	if c.feed.enabled() {
		out = append(out, daemon.Loop(componentDataplane, c.feed.run))
	}
	return append(out, &coordinatorComponent{Component: daemon.Loop("coordinator", c.coord.Run), coord: c.coord}, &leaderDiscovery{c: c})
}

// coordinatorComponent runs the coordinator and drains it on SIGTERM: the
// node's endpoints leave the cluster's snapshot before it exits.
type coordinatorComponent struct {
	daemon.Component
	coord *Coordinator
}

func (c *coordinatorComponent) Drain(ctx context.Context) error { return c.coord.Drain(ctx) }

// leaderDiscoveryWait bounds how long startup waits to learn the leader
// before reconciling: reconciliation never depends on coordination.
const leaderDiscoveryWait = 5 * time.Second

// leaderDiscovery holds startup until the election knows a leader (or
// leaderDiscoveryWait passed), so the NodeGroup is reconciled after the
// leader is discovered, as the startup order requires.
type leaderDiscovery struct{ c *Node }

func (l *leaderDiscovery) Name() string { return "leader-discovery" }

func (l *leaderDiscovery) Start(ctx context.Context) error {
	deadline := time.Now().Add(leaderDiscoveryWait)
	for {
		if rec, ok := l.c.coord.Elector().Leader(); ok {
			l.c.log.Info("leader discovered", "leader", rec.LeaderID, "addr", rec.LeaderAddr)
			return nil
		}
		if time.Now().After(deadline) {
			l.c.log.Warn("no leader discovered yet: reconciling anyway", "waited", leaderDiscoveryWait.String())
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (l *leaderDiscovery) Stop(context.Context) error { return nil }

// dnsComponent restores the durable Service snapshot (identities, no
// backends) and then serves DNS. A DNS server that cannot listen is
// reported in /readyz; it does not stop Pod publication.
type dnsComponent struct {
	c      *Node
	health *health.Health
	up     bool
}

func (d *dnsComponent) Name() string { return componentDNS }

func (d *dnsComponent) Start(ctx context.Context) error {
	d.c.restoring.Store(true)
	err := d.c.coord.Restore(ctx)
	d.c.restoring.Store(false)
	if err != nil {
		d.c.log.Warn("durable Service snapshot not restored: Service DNS starts from its local copy", "err", err)
	}
	if d.c.dns == nil {
		return nil
	}
	if err := d.c.dns.Start(ctx); err != nil {
		err = fmt.Errorf("%w: stop whatever uses the port or set %s", err, EnvDNSAddr)
		d.c.log.Error("service DNS not served: Pods are still published", "err", err)
		d.health.Report(componentDNS, err)
		return nil
	}
	d.up = true
	d.c.log.Info("serving service DNS", "addr", d.c.dns.Addr().String())
	return nil
}

func (d *dnsComponent) Stop(ctx context.Context) error {
	if !d.up {
		return nil
	}
	return d.c.dns.Stop(ctx)
}

// Coordinator is the node's coordinator; nil on a nil Node.
func (c *Node) Coordinator() *Coordinator {
	if c == nil {
		return nil
	}
	return c.coord
}

// ID is the node ID bound into the node's identity.
func (c *Node) ID() string { return c.nodeID }

// SetHint hands the leader's index hints (and freed rollout slots) to the
// reconcile loop; call it before the node's components start.
func (c *Node) SetHint(hint func(etag string)) { c.hint = hint }
