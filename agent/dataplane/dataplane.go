// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"podmin.dev/podmin/bpf"
)

// DefaultReconcileInterval is how often interfaces are reconciled without
// a refresh hint.
const DefaultReconcileInterval = 10 * time.Second

// Config configures a Dataplane.
type Config struct {
	// NodeAddr is the node's IPv6 address, the source of NATed Service
	// traffic. It may be invalid while there are no Services.
	NodeAddr netip.Addr
	// PodPrefix is the node's delegated Pod prefix; host routes inside it
	// mark the host-side Pod veths.
	PodPrefix netip.Prefix
	// PodENI names the Pod ENI. Empty: the interfaces of default routes in
	// policy routing tables.
	PodENI string
	// NetNS is the path of the network namespace whose interfaces are
	// programmed; empty means the agent's own.
	NetNS string
	// ReconcileInterval defaults to DefaultReconcileInterval.
	ReconcileInterval time.Duration
	// Limits size the program's maps, which the kernel allocates whole
	// at load: see bpf.Limits and bpf.Memory. Zero means
	// bpf.DefaultLimits.
	Limits bpf.Limits
	// Health, when set, receives Health's result after every
	// reconciliation in Run: nil, or the backend ports that ran out of
	// source-NAT ports recently. The agent reports it in /readyz.
	Health func(error)
	// Log receives attach and detach events; nil discards them.
	Log *slog.Logger
	// Now is the clock of Health's window; nil means time.Now.
	Now func() time.Time
}

// Dataplane owns the loaded program, its maps and its TCX links.
type Dataplane struct {
	cfg   Config
	log   *slog.Logger
	hints chan struct{}

	mu         sync.Mutex
	objs       *bpf.VipObjects
	locked     uint64 // bytes of kernel memory the maps hold
	current    *state
	links      map[int]attachment
	writes     int // map writes so far, for tests of minimal updates
	services   int // Service ports currently programmed
	exhaustion map[exhaustionKey]exhaustionSeen
	stopped    bool
}

type attachment struct {
	ifc  Interface
	link link.Link
}

// New loads the program and its empty maps into the kernel and logs the
// kernel memory they hold. Nothing is attached until Apply programs a
// Service.
func New(cfg Config) (*Dataplane, error) {
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = DefaultReconcileInterval
	}
	if cfg.Limits == (bpf.Limits{}) {
		cfg.Limits = bpf.DefaultLimits
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := bpf.Built(); err != nil {
		return nil, fmt.Errorf("load the eBPF dataplane: %w", err)
	}
	if err := cfg.Limits.Check(); err != nil {
		return nil, err
	}
	csumIPv6, err := bpf.CsumIPv6Supported()
	if err != nil {
		return nil, fmt.Errorf("load the eBPF dataplane (needs root or CAP_BPF and CAP_NET_ADMIN): %w", err)
	}
	objs, err := bpf.Load(bpf.LoadOptions{Limits: cfg.Limits, CsumIPv6: csumIPv6})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load the eBPF dataplane: the kernel verifier rejected it: %w", err)
		}
		return nil, fmt.Errorf("load the eBPF dataplane (needs root or CAP_BPF and CAP_NET_ADMIN): %w", err)
	}
	locked, err := bpf.LockedMemory(objs)
	if err != nil {
		objs.Close()
		return nil, fmt.Errorf("load the eBPF dataplane: %w", err)
	}
	log.Info("dataplane loaded", "locked_bytes", locked, "service_keys", cfg.Limits.Services,
		"backend_entries", cfg.Limits.Backends, "flows", cfg.Limits.Flows, "csum_ipv6_flag", csumIPv6)
	return &Dataplane{
		cfg:        cfg,
		log:        log,
		hints:      make(chan struct{}, 1),
		objs:       objs,
		locked:     locked,
		current:    newState(),
		links:      map[int]attachment{},
		exhaustion: map[exhaustionKey]exhaustionSeen{},
	}, nil
}

// LockedMemory returns the bytes of kernel memory the program's maps
// hold, as the kernel accounted them at load; they hold it whole from the
// start, Services or not.
func (d *Dataplane) LockedMemory() uint64 { return d.locked }

func (d *Dataplane) now() time.Time { return d.cfg.Now() }

// Apply programs exactly services, writing only the map entries that
// change, and attaches or detaches the program when Services appear or
// all disappear. Existing flows keep their backends; new flows use the
// new ready set. On error nothing is changed, or (for a kernel error
// midway) the maps hold a mix that the next Apply converges.
func (d *Dataplane) Apply(ctx context.Context, services []Service) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return errors.New("the dataplane is stopped")
	}
	next, err := compile(services, d.cfg.NodeAddr, d.cfg.Limits, d.current)
	if err != nil {
		return err
	}
	for _, u := range diff(d.current, next) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := d.write(u); err != nil {
			d.current = unknown(d.current, next)
			return err
		}
	}
	d.current = next
	d.services = len(next.services)
	return d.reconcileLocked()
}

// unknown returns the state to assume after a write between prev and next
// failed: every key of either, with values that match nothing, so the
// next diff rewrites all of next's entries and deletes all of prev's
// others. Service ids are kept, so compile assigns the same ones again.
func unknown(prev, next *state) *state {
	s := newState()
	for k, v := range prev.vips {
		if _, ok := next.vips[k]; !ok {
			s.vips[k] = v
		}
	}
	for _, from := range []*state{prev, next} {
		for k, v := range from.services {
			v.Count = ^uint32(0)
			s.services[k] = v
		}
		for k := range from.backends {
			s.backends[k] = bpf.VipBackend{Pad: 0xffff}
		}
	}
	return s
}

func (d *Dataplane) write(u update) error {
	var m *ebpf.Map
	switch u.m {
	case mapConfig:
		m = d.objs.Config
	case mapVIPs:
		m = d.objs.Vips
	case mapServices:
		m = d.objs.Services
	case mapBackends:
		m = d.objs.Backends
	}
	d.writes++
	if u.val == nil {
		if err := m.Delete(u.key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete from dataplane map %s: %w", u.m, err)
		}
		return nil
	}
	if err := m.Update(u.key, u.val, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("update dataplane map %s: %w", u.m, err)
	}
	return nil
}

// Refresh hints that Pods or interfaces changed; hints coalesce into one
// interface reconciliation in Run.
func (d *Dataplane) Refresh() {
	select {
	case d.hints <- struct{}{}:
	default:
	}
}

// Run reconciles interfaces on every hint and every ReconcileInterval,
// and then reports Health to Config.Health, until ctx ends; then it stops
// the dataplane.
func (d *Dataplane) Run(ctx context.Context) error {
	t := time.NewTicker(d.cfg.ReconcileInterval)
	defer t.Stop()
	defer d.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-d.hints:
		}
		if err := d.Reconcile(); err != nil {
			d.log.Warn("dataplane interface reconciliation failed", "err", err)
		}
		if d.cfg.Health != nil {
			d.cfg.Health(d.Health())
		}
	}
}

// Reconcile attaches the program to the interfaces it belongs on and
// detaches it from the others (from all when there are no Services).
func (d *Dataplane) Reconcile() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return nil
	}
	return d.reconcileLocked()
}

func (d *Dataplane) reconcileLocked() error {
	return inNetNS(d.cfg.NetNS, func() error {
		var want []Interface
		if d.services > 0 {
			if err := reserveNATPorts(); err != nil {
				return err
			}
			var err error
			if want, err = discover(d.cfg.PodPrefix, d.cfg.PodENI); err != nil {
				return err
			}
		}
		keep := map[int]bool{}
		var errs []error
		for _, ifc := range want {
			if a, ok := d.links[ifc.Index]; ok && a.ifc == ifc && attached(a.link, ifc.Index) {
				keep[ifc.Index] = true
				continue
			}
			d.detach(ifc.Index)
			l, err := link.AttachTCX(link.TCXOptions{
				Interface: ifc.Index,
				Program:   d.objs.PodminVip,
				Attach:    ebpf.AttachTCXIngress,
			})
			if err != nil {
				errs = append(errs, fmt.Errorf("attach the dataplane to %s: %w", ifc.Name, err))
				continue
			}
			d.links[ifc.Index] = attachment{ifc: ifc, link: l}
			keep[ifc.Index] = true
			d.log.Info("dataplane attached", "interface", ifc.Name)
		}
		for idx := range d.links {
			if !keep[idx] {
				d.detach(idx)
			}
		}
		return errors.Join(errs...)
	})
}

// attached reports whether l is still attached to ifindex; a link whose
// device went away reports another index.
func attached(l link.Link, ifindex int) bool {
	info, err := l.Info()
	if err != nil || info.TCX() == nil {
		return false
	}
	return int(info.TCX().Ifindex) == ifindex
}

func (d *Dataplane) detach(idx int) {
	a, ok := d.links[idx]
	if !ok {
		return
	}
	delete(d.links, idx)
	if err := a.link.Close(); err != nil {
		d.log.Warn("dataplane detach failed", "interface", a.ifc.Name, "err", err)
		return
	}
	d.log.Info("dataplane detached", "interface", a.ifc.Name)
}

// Interfaces returns the interfaces the program is attached to.
func (d *Dataplane) Interfaces() []Interface {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []Interface
	for _, a := range d.links {
		out = append(out, a.ifc)
	}
	sortInterfaces(out)
	return out
}

// Stop detaches the program everywhere and releases it and its maps. It
// is safe to call more than once.
func (d *Dataplane) Stop() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return nil
	}
	d.stopped = true
	for idx := range d.links {
		d.detach(idx)
	}
	return d.objs.Close()
}
