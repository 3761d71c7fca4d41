// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/dataplane"
	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// dataplaneFeed programs the dataplane from the coordinator's view: the
// Service VIPs, their ports (from the Services' payloads) and ready
// backends. It renews the dataplane's lease from the coordinator's: the
// backends take new flows until Retention after a leader last confirmed
// them, also when the pinned dataplane outlives the agent.
type dataplaneFeed struct {
	cluster string
	store   objstore.Store
	index   *IndexCache
	health  *health.Health
	log     *slog.Logger
	dp      Dataplane
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
	good map[ServiceID][]dataplane.Port
}

// Dataplane is the part of *dataplane.Dataplane the node drives.
type Dataplane interface {
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

// dataplaneWanted decides whether to load the dataplane and why not.
func dataplaneWanted(opts NodeOptions) (bool, string) {
	switch opts.Dataplane {
	case DataplaneOn:
		return true, ""
	case DataplaneOff:
		return false, EnvDataplane + "=off"
	}
	switch {
	case opts.Local:
		return false, "local node mode (set " + EnvDataplane + "=on to load it)"
	case runtime.GOOS != "linux":
		return false, "not Linux"
	case os.Geteuid() != 0:
		return false, "not root"
	}
	return true, ""
}

func newDataplaneFeed(opts NodeOptions, nodeAddr netip.Addr, log *slog.Logger) *dataplaneFeed {
	opts.defaults()
	hl := opts.Health
	f := &dataplaneFeed{cluster: opts.Cluster, store: opts.Store, index: NewIndexCache(opts.Store), health: hl, log: log,
		kick: make(chan struct{}, 1), ports: map[string][]dataplane.Port{}, good: map[ServiceID][]dataplane.Port{}}
	pinPath := filepath.Join(opts.Root, filepath.FromSlash(dataplane.DefaultPinPath))
	want, why := dataplaneWanted(opts)
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
	if opts.Local && !opts.NodeAddr.IsValid() {
		// The documentation identity address derived from the API port is
		// no source for NAT; an address given with EnvNodeAddr (a local
		// node with a network of its own) is. Run refuses DataplaneOn
		// without one in local mode.
		nodeAddr = netip.Addr{}
	}
	dp, err := opts.NewDataplane(dataplane.Config{NodeAddr: nodeAddr, PodPrefix: opts.PodPrefix, Log: log, PinPath: pinPath,
		Health: func(err error) { hl.Report(componentDataplane+" NAT", err) }})
	if err != nil {
		err = fmt.Errorf("load the eBPF dataplane: %w (set %s=off to run without it)", err, EnvDataplane)
		log.Error("dataplane not loaded: Services have DNS but no VIP forwarding", "err", err)
		hl.Report(componentDataplane, err)
		return f
	}
	f.dp = dp
	hl.Report(componentDataplane, nil)
	hl.Report(componentPinning, dp.PinProblem())
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
		bound := time.Now().Add(Retention)
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
	if err := f.dp.Renew(at.Add(Retention)); err != nil {
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
	payload := map[ServiceID]string{}
	for _, it := range ix.Items() {
		if id, ok := it.Entry.ServiceID(); ok {
			payload[ServiceID{Namespace: id.Namespace, Name: id.Name}] = it.Entry.Service
		}
	}
	var errs []error
	for _, s := range v.GetServices() {
		id := ServiceID{Namespace: s.Namespace, Name: s.Name}
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
