// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/daemon"
	"podmin.dev/podmin/agent/dataplane"
	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/agent/identity"
	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/state"
)

// Component names the coordination wiring reports readiness under.
const (
	componentCoordination = "coordination"
	// componentRefused names, in /readyz, the leader's refusal of this
	// node's claim (a node ID another live agent holds, say).
	componentRefused   = "coordination identity"
	componentDNS       = "service-dns"
	componentDataplane = "dataplane"
)

// coordination is the node's share of cluster coordination: its mTLS
// identity, the coordinator (election, coordination API, snapshots), the
// Service DNS server and the dataplane, both fed from the coordinator's
// view. Any part may be missing: Pod publication never depends on it.
type coordination struct {
	log    *slog.Logger
	nodeID string
	coord  *coordinator.Coordinator
	dns    *service.Server
	feed   *dataplaneFeed
	// restoring is set while the durable snapshot is restored: the views
	// published meanwhile come from storage, not from a leader.
	restoring atomic.Bool
	// health receives what keeps the node from persisting its state.
	health *health.Health

	// hint hands the leader's index hints to the reconcile loop; set once
	// the loop exists, before anything runs.
	hint func(etag string)
}

// localMode reports whether the agent runs in local node mode.
func localMode(cfg Config) bool { return cfg.Provider == "local" }

// newCoordination assembles coordination. It returns nil (and logs why)
// when the cluster has no CA yet or the node cannot take part; health
// carries the reasons that need an operator. Only a failure to read an
// existing CA stops the agent, as for the workload CA key.
func newCoordination(ctx context.Context, cfg Config, opts Options, r identity.SecretReader, store objstore.Bucket, health *health.Health, log *slog.Logger) (*coordination, error) {
	if r == nil {
		log.Warn("coordination, Service DNS and the dataplane disabled: the Podmin data directory holding the local secrets store is unknown; set XDG_DATA_HOME")
		return nil, nil
	}
	ca, err := identity.ReadClusterCA(ctx, r, cfg.Cluster)
	if errors.Is(err, secrets.ErrNotFound) {
		log.Warn("coordination, Service DNS and the dataplane disabled until the agent restarts: the cluster has no cluster CA yet", "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	disable := func(err error) (*coordination, error) {
		log.Error("coordination disabled: Pods are still published", "err", err)
		health.Report(componentCoordination, err)
		return nil, nil
	}
	lis, advertise, nodeID, dial, err := coordinationAddrs(cfg, opts)
	if err != nil {
		return disable(err)
	}
	clog := log.With("component", "coordinator")
	id, err := identity.New(identity.Options{CA: ca, Cluster: cfg.Cluster, NodeGroup: cfg.NodeGroup, NodeID: nodeID,
		Addr: advertise.Addr(), Log: clog})
	if err != nil {
		_ = lis.Close()
		return disable(err)
	}
	c := &coordination{log: log, nodeID: nodeID, health: health}
	if opts.DNSAddr != "" {
		c.dns = service.New(service.Config{Addr: opts.DNSAddr, Cluster: cfg.Cluster,
			StatePath: filepath.Join(opts.Root, filepath.FromSlash(service.DefaultStatePath)),
			ZonePath:  filepath.Join(opts.Root, filepath.FromSlash(service.DefaultZonePath)), Log: log.With("component", "dns")})
	}
	c.feed = newDataplaneFeed(cfg, opts, store, advertise.Addr(), health, log.With("component", componentDataplane))
	copts := coordinator.Options{
		NodeID: nodeID, NodeGroup: cfg.NodeGroup, Advertise: advertise, Listener: lis,
		PodPrefix: cfg.IPv6Prefix, Store: store, Identity: id,
		// The leader polls the index, hints every node, takes the
		// Services from it and keeps the NodeGroup views.
		Index:  coordinator.NewIndexCache(store),
		Views:  state.NewViewKeeper(store),
		OnView: c.view,
		// A view counts as applied once DNS and the dataplane hold it
		// (view, dataplaneFeed.run): a rollout slot's Pod stops only
		// after every live node confirmed that.
		AppliedByCaller: true,
		OnRefused:       func(err error) { health.Report(componentRefused, err) },
		OnIndexHint:     func(etag string) { c.hint(etag) },
		OnSlotFreed:     func() { c.hint("") },
		SlotTimeout:     opts.SlotTimeout, ProbelessHold: opts.ProbelessHold, Drain: opts.Drain,
		Kubelet: cfg.Provider != "local" || kubeletSocketExists(opts.Root),
		Log:     clog, Dial: dial,
	}
	c.coord, err = coordinator.New(copts)
	if err != nil {
		_ = lis.Close()
		return disable(err)
	}
	c.feed.confirmed = func() time.Time { return c.coord.Status().Confirmed }
	c.feed.applied = c.coord.Applied
	log.Info("coordination enabled", "node", nodeID, "advertise", advertise.String(), "api", lis.Addr().String())
	return c, nil
}

// coordinationAddrs listens for the coordination API and returns the
// address and node ID the node's identity binds, and how peers are dialed
// (nil: at their advertised addresses). In local node mode every agent
// listens on its own loopback port by default and keeps a
// documentation-range identity address derived from it, which
// api.LoopbackDial maps back; given a non-loopback EnvAPIAddr (local
// nodes with networks of their own, e.g. one network namespace each) it
// listens there, advertises its node address and dials peers at theirs,
// as a cloud node does.
func coordinationAddrs(cfg Config, opts Options) (net.Listener, netip.AddrPort, string, api.DialFunc, error) {
	if localMode(cfg) {
		addr := opts.APIAddr
		if addr == "" {
			addr = netip.AddrPortFrom(netip.IPv6Loopback(), api.Port).String()
		}
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return nil, netip.AddrPort{}, "", nil, fmt.Errorf("%s=%q is not an address and port such as [::1]:18081", EnvAPIAddr, addr)
		}
		if !ap.Addr().IsLoopback() {
			return localNetworkAddrs(ap, opts)
		}
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, netip.AddrPort{}, "", nil, fmt.Errorf("coordination API: %w: give each local agent its own %s", err, EnvAPIAddr)
		}
		port := uint16(lis.Addr().(*net.TCPAddr).Port)
		node := opts.NodeAddr
		if !node.IsValid() {
			node = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(port >> 8), 15: byte(port)})
		}
		id := opts.NodeID
		if id == "" {
			id = "local-" + strconv.Itoa(int(port))
		}
		return lis, netip.AddrPortFrom(node, port), id, api.LoopbackDial, nil
	}
	node := opts.NodeAddr
	if !node.IsValid() {
		var err error
		if node, err = discoverNodeAddr(cfg.IPv6Prefix); err != nil {
			return nil, netip.AddrPort{}, "", nil, err
		}
	}
	advertise := netip.AddrPortFrom(node, api.Port)
	listen := advertise.String()
	if opts.APIAddr != "" {
		listen = opts.APIAddr
	}
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, netip.AddrPort{}, "", nil, fmt.Errorf("coordination API: %w", err)
	}
	id := opts.NodeID
	if id == "" {
		h, err := os.Hostname()
		if err != nil {
			_ = lis.Close()
			return nil, netip.AddrPort{}, "", nil, fmt.Errorf("node ID: %w: set %s", err, EnvNodeID)
		}
		id = h
	}
	return lis, advertise, id, nil, nil
}

// localNetworkAddrs is local node mode on a network: the API listens at
// listen, a non-loopback address, and the node is known to its peers by
// its node address (EnvNodeAddr, else the listen address) at the bound
// port. Peers are dialed directly, so every local agent of the cluster
// must run this way.
func localNetworkAddrs(listen netip.AddrPort, opts Options) (net.Listener, netip.AddrPort, string, api.DialFunc, error) {
	node := opts.NodeAddr
	if !node.IsValid() {
		node = listen.Addr()
		if a := node; !a.Is6() || a.Is4In6() || !a.IsGlobalUnicast() || a.IsPrivate() || a.Zone() != "" {
			return nil, netip.AddrPort{}, "", nil, fmt.Errorf("%s=%s: a local node serving the coordination API beyond loopback is known to its peers by a global IPv6 address: "+
				"listen on one, or set %s to the address its peers reach it at", EnvAPIAddr, listen, EnvNodeAddr)
		}
	}
	lis, err := net.Listen("tcp", listen.String())
	if err != nil {
		return nil, netip.AddrPort{}, "", nil, fmt.Errorf("coordination API: %w: listen on an address of this node's network, or unset %s to serve on loopback", err, EnvAPIAddr)
	}
	port := uint16(lis.Addr().(*net.TCPAddr).Port)
	id := opts.NodeID
	if id == "" {
		// Local agents on their own networks may share a port, never an
		// address: the default ID names both.
		id = "local-" + strings.ReplaceAll(node.String(), ":", "-") + "-" + strconv.Itoa(int(port))
	}
	return lis, netip.AddrPortFrom(node, port), id, nil, nil
}

// discoverNodeAddr returns the node's global IPv6 address: the first
// global unicast, non-ULA address outside the Pod prefix on an up,
// non-loopback interface, in interface order (the primary ENI first).
func discoverNodeAddr(podPrefix netip.Prefix) (netip.Addr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("find the node IPv6 address: %w: set %s", err, EnvNodeAddr)
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok || !ip.Is6() || ip.Is4In6() || !ip.IsGlobalUnicast() || ip.IsPrivate() || podPrefix.Contains(ip) {
				continue
			}
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("the node has no global IPv6 address outside its Pod prefix %s: set %s", podPrefix, EnvNodeAddr)
}

// view receives each snapshot the coordinator settles on: every Service
// gets its DNS identity whatever its readiness, and the dataplane gets
// the VIPs with their ready backends. The coordinator learns that the
// node applied it once DNS serves it and the dataplane programmed it
// (without a dataplane, once DNS serves it).
func (c *coordination) view(s *pb.ServiceSnapshot) {
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

func (c *coordination) dnsCluster() string { return c.feed.cluster }

// publisher is the staticpod Publisher: the coordinator, and extra (tests)
// when set.
func (c *coordination) publisher(extra staticpod.Publisher) staticpod.Publisher {
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

// podsChanged is the kubelet Pods watcher's refresh.
func (c *coordination) podsChanged(ps []*corev1.Pod) {
	c.coord.PodsChanged(ps)
	c.feed.refresh()
}

// serving returns the components that serve, in start order: Service DNS
// (after the durable snapshot is restored), the dataplane, then the
// coordinator, which discovers the leader. They stop in reverse order
// after the DNS TTL margin: the coordinator resigns first and the
// dataplane is released before DNS stops (a pinned one with Services
// stays attached for the next agent).
func (c *coordination) serving(health *health.Health) []daemon.Component {
	out := []daemon.Component{&dnsComponent{c: c, health: health}}
	if c.feed.enabled() {
		out = append(out, daemon.Loop(componentDataplane, c.feed.run))
	}
	return append(out, &coordinatorComponent{Component: daemon.Loop("coordinator", c.coord.Run), coord: c.coord}, &leaderDiscovery{c: c})
}

// coordinatorComponent runs the coordinator and drains it on SIGTERM: the
// node's endpoints leave the cluster's snapshot before it exits.
type coordinatorComponent struct {
	daemon.Component
	coord *coordinator.Coordinator
}

func (c *coordinatorComponent) Drain(ctx context.Context) error { return c.coord.Drain(ctx) }

// leaderDiscoveryWait bounds how long startup waits to learn the leader
// before reconciling: reconciliation never depends on coordination.
const leaderDiscoveryWait = 5 * time.Second

// leaderDiscovery holds startup until the election knows a leader (or
// leaderDiscoveryWait passed), so the NodeGroup is reconciled after the
// leader is discovered, as the startup order requires.
type leaderDiscovery struct{ c *coordination }

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
	c      *coordination
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

// dataplaneFeed programs the dataplane from the coordinator's view: the
// Service VIPs, their ports (from the Services' payloads) and ready
// backends. It renews the dataplane's lease from the coordinator's: the
// backends take new flows until Retention after a leader last confirmed
// them, also when the pinned dataplane outlives the agent.
type dataplaneFeed struct {
	cluster string
	store   objstore.Store
	index   *coordinator.IndexCache
	health  *health.Health
	log     *slog.Logger
	dp      programmer
	kick    chan struct{}
	// confirmed returns when a leader last confirmed the coordinator's
	// snapshot (zero: never); nil renews nothing.
	confirmed func() time.Time
	// applied, when set, is told each view the dataplane was programmed
	// with.
	applied func(*pb.ServiceSnapshot)

	mu   sync.Mutex
	view *pb.ServiceSnapshot
	// restored marks view as the durable snapshot's, restored at startup
	// (identities, no backends), rather than a leader's.
	restored bool
	ports    map[string][]dataplane.Port // by Service payload path (immutable)
	// good are the ports last programmed for each Service: a Service whose
	// new payload cannot be read keeps them.
	good map[coordinator.ServiceID][]dataplane.Port
}

// programmer is the part of *dataplane.Dataplane the agent drives.
type programmer interface {
	Run(ctx context.Context) error
	Apply(ctx context.Context, services []dataplane.Service) error
	Refresh()
	Renew(until time.Time) error
	Inherited() (until time.Time, ok bool)
	PinProblem() error
}

// componentDNSState names, in /readyz, Service DNS records the agent
// serves but cannot write to disk.
const componentDNSState = componentDNS + " state"

// componentPinning names, in /readyz, a dataplane that runs unpinned
// although it should be pinned: a restart of this agent would interrupt
// Service traffic.
const componentPinning = componentDataplane + " pinning"

// renewInterval paces the dataplane lease renewals; the lease itself
// ends Retention after the coordinator's last confirmation.
const renewInterval = 2 * time.Second

// newDataplane loads the dataplane; tests replace it.
var newDataplane = func(cfg dataplane.Config) (programmer, error) { return dataplane.New(cfg) }

// dataplaneWanted decides whether to load the dataplane and why not.
func dataplaneWanted(cfg Config, opts Options) (bool, string) {
	switch opts.Dataplane {
	case DataplaneOn:
		return true, ""
	case DataplaneOff:
		return false, EnvDataplane + "=off"
	}
	switch {
	case localMode(cfg):
		return false, "local node mode (set " + EnvDataplane + "=on to load it)"
	case runtime.GOOS != "linux":
		return false, "not Linux"
	case os.Geteuid() != 0:
		return false, "not root"
	}
	return true, ""
}

func newDataplaneFeed(cfg Config, opts Options, store objstore.Store, nodeAddr netip.Addr, health *health.Health, log *slog.Logger) *dataplaneFeed {
	f := &dataplaneFeed{cluster: cfg.Cluster, store: store, index: coordinator.NewIndexCache(store), health: health, log: log,
		kick: make(chan struct{}, 1), ports: map[string][]dataplane.Port{}, good: map[coordinator.ServiceID][]dataplane.Port{}}
	pinPath := filepath.Join(opts.Root, filepath.FromSlash(dataplane.DefaultPinPath))
	want, why := dataplaneWanted(cfg, opts)
	if !want {
		log.Info("dataplane not loaded", "reason", why)
		if opts.Dataplane == DataplaneOff {
			// Off means no dataplane on the node, also none an earlier
			// agent left pinned.
			removed, err := dataplane.RemovePinned(pinPath)
			switch {
			case err != nil:
				log.Error("the pinned dataplane an earlier agent left could not be removed", "err", err)
			case removed:
				log.Info("removed the pinned dataplane an earlier agent left", "path", pinPath)
			}
		}
		return f
	}
	if localMode(cfg) && !opts.NodeAddr.IsValid() {
		// The documentation identity address derived from the API port is
		// no source for NAT; an address given with EnvNodeAddr (a local
		// node with a network of its own) is. Run refuses DataplaneOn
		// without one in local mode.
		nodeAddr = netip.Addr{}
	}
	dp, err := newDataplane(dataplane.Config{NodeAddr: nodeAddr, PodPrefix: cfg.IPv6Prefix, Log: log, PinPath: pinPath,
		Health: func(err error) { health.Report(componentDataplane+" NAT", err) }})
	if err != nil {
		err = fmt.Errorf("load the eBPF dataplane: %w (set %s=off to run without it)", err, EnvDataplane)
		log.Error("dataplane not loaded: Services have DNS but no VIP forwarding", "err", err)
		health.Report(componentDataplane, err)
		return f
	}
	f.dp = dp
	health.Report(componentDataplane, nil)
	health.Report(componentPinning, dp.PinProblem())
	return f
}

func (f *dataplaneFeed) enabled() bool { return f != nil && f.dp != nil }

// setView hands the feed a view; restored marks the durable snapshot's.
func (f *dataplaneFeed) setView(s *pb.ServiceSnapshot, restored bool) {
	if !f.enabled() {
		return
	}
	f.mu.Lock()
	f.view, f.restored = s, restored
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

func (f *dataplaneFeed) refresh() {
	if f.enabled() {
		f.dp.Refresh()
	}
}

// run drives the dataplane's interface reconciliation, applies each view
// and renews the lease until ctx ends; then the dataplane stops (a pinned
// one with Services stays attached for the next agent).
//
// What an earlier agent left forwarding (dataplane.Inherited) is kept
// until a leader's live snapshot arrives or the inherited lease runs out:
// the durable snapshot restored at startup has no backends, and applying
// it would cut the node's Service traffic until a leader is heard.
func (f *dataplaneFeed) run(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- f.dp.Run(ctx) }()
	var holdC <-chan time.Time
	if until, ok := f.dp.Inherited(); ok {
		// A lease is at most Retention past a confirmation, which came
		// before this start: past that bound nothing inherited is live.
		bound := time.Now().Add(coordinator.Retention)
		if until.IsZero() || until.After(bound) {
			until = bound
		}
		f.log.Info("keeping the dataplane an earlier agent left until a leader's snapshot or its lease ends", "until", until.Format(time.RFC3339))
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		holdC = t.C
	}
	renew := time.NewTicker(renewInterval)
	defer renew.Stop()
	applied, failed := false, false
	for {
		select {
		case <-ctx.Done():
			return <-done
		case <-renew.C:
			if applied {
				f.renew()
			}
			if !failed {
				continue
			}
			// The last view was not programmed: try again, so that a
			// passing failure does not leave the node unconfirmed (and a
			// rollout waiting for it) until the next view.
		case <-holdC:
			holdC = nil
			f.log.Info("the inherited dataplane's lease ended without a leader's snapshot: applying the current view")
		case <-f.kick:
		}
		f.mu.Lock()
		v, restored := f.view, f.restored
		f.mu.Unlock()
		if v == nil {
			continue
		}
		if holdC != nil && restored {
			f.log.Info("the durable snapshot has no backends: the inherited dataplane keeps forwarding until a leader's snapshot")
			continue
		}
		if holdC != nil {
			holdC = nil
			f.log.Info("a leader's snapshot arrived: programming it over the inherited dataplane")
		}
		// Renewed first, so the backends a live view brings are written
		// with a live lease.
		f.renew()
		// One bad Service is reported and skipped (it keeps what was
		// last programmed for it); the others are programmed.
		svcs, bad, err := f.services(ctx, v)
		if err == nil {
			err = f.dp.Apply(ctx, svcs)
			applied = applied || err == nil
		}
		failed = err != nil
		if err == nil && f.applied != nil {
			// Its backends are what the dataplane holds now (a Service
			// whose ports could not be read keeps its last ports, not
			// its last backends).
			f.applied(v)
		}
		if err != nil && ctx.Err() == nil {
			f.log.Error("dataplane not programmed: it keeps its last state", "err", err)
		}
		if bad != nil && ctx.Err() == nil {
			f.log.Error("dataplane programmed without some Services' new ports", "err", bad)
		}
		if ctx.Err() == nil {
			f.health.Report(componentDataplane, errors.Join(err, bad))
			f.health.Report(componentPinning, f.dp.PinProblem())
		}
	}
}

// renew extends the dataplane's lease to Retention after the
// coordinator's last confirmation; never confirmed, it is left alone.
func (f *dataplaneFeed) renew() {
	if f.confirmed == nil {
		return
	}
	at := f.confirmed()
	if at.IsZero() {
		return
	}
	if err := f.dp.Renew(at.Add(coordinator.Retention)); err != nil {
		f.log.Warn("dataplane lease not renewed", "err", err)
	}
}

// services turns a snapshot into the dataplane's Services. Ports come from
// the Services' payloads in the deployment index, fetched once per
// immutable payload path. A Service whose payload cannot be read or
// decoded is named in bad and keeps the ports last programmed for it
// (or is left out); err is for the index itself, when nothing can be
// programmed (a vanished index is such an error, never "no Services").
func (f *dataplaneFeed) services(ctx context.Context, v *pb.ServiceSnapshot) (out []dataplane.Service, bad, err error) {
	if len(v.GetServices()) == 0 {
		return nil, nil, nil
	}
	ix, _, err := f.index.Read(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read the deployment index for Service ports: %w", err)
	}
	payload := map[coordinator.ServiceID]string{}
	for _, it := range ix.Items() {
		if id, ok := it.Entry.ServiceID(); ok {
			payload[coordinator.ServiceID{Namespace: id.Namespace, Name: id.Name}] = it.Entry.Service
		}
	}
	var errs []error
	for _, s := range v.GetServices() {
		id := coordinator.ServiceID{Namespace: s.Namespace, Name: s.Name}
		p, ok := payload[id]
		if !ok {
			continue // deleted since the snapshot: the next one drops it
		}
		ports, err := f.servicePorts(ctx, p)
		f.mu.Lock()
		if err == nil {
			f.good[id] = ports
		} else {
			errs = append(errs, fmt.Errorf("Service %s/%s: %w", s.Namespace, s.Name, err))
			ports = f.good[id]
		}
		f.mu.Unlock()
		if ports == nil {
			continue
		}
		svc := dataplane.Service{Namespace: s.Namespace, Name: s.Name, VIP: service.Identity(f.cluster, s.Namespace, s.Name).VIP, Ports: ports}
		for _, e := range s.Endpoints {
			if a, err := netip.ParseAddr(e.Address); err == nil {
				svc.Backends = append(svc.Backends, a)
			}
		}
		out = append(out, svc)
	}
	return out, errors.Join(errs...), nil
}

func (f *dataplaneFeed) servicePorts(ctx context.Context, path string) ([]dataplane.Port, error) {
	f.mu.Lock()
	ports, ok := f.ports[path]
	f.mu.Unlock()
	if ok {
		return ports, nil
	}
	data, err := state.FetchPayload(ctx, f.store, path)
	if err != nil {
		return nil, err
	}
	spec, err := manifest.DecodeService(data)
	if err != nil {
		return nil, fmt.Errorf("Service payload %s: %w", path, err)
	}
	for _, p := range spec.Ports {
		proto := dataplane.TCP
		if p.Protocol == corev1.ProtocolUDP {
			proto = dataplane.UDP
		}
		ports = append(ports, dataplane.Port{Protocol: proto, Port: uint16(p.Port), TargetPort: uint16(p.TargetPort)})
	}
	ports = slices.Clip(ports)
	f.mu.Lock()
	f.ports[path] = ports
	f.mu.Unlock()
	return ports, nil
}
