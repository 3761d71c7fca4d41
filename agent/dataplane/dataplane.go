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
	// PinPath is a directory on a bpf filesystem (DefaultPinPath beneath
	// the node root) where the program, its maps and its links are pinned,
	// so Service traffic keeps flowing while the agent restarts. Empty, or
	// a parent that is not a bpf filesystem, runs unpinned: everything goes
	// with the process, and PinProblem says why.
	PinPath string
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

	// lease is the bpf_ktime_get_ns deadline Renew set, written into the
	// config map with the node address.
	lease uint64
	// pin is the pin directory; nil runs unpinned, and pinErr says why
	// when pinning was asked for.
	pin    *pins
	pinErr error
	// applied: the maps hold what an agent of this generation applied
	// (adopted, or Apply ran); committed: its pins are the generation's.
	applied, committed bool
	// pending are links of an earlier generation's program, left
	// forwarding on that program's maps until the first Apply moves them
	// to this program; old are that generation's pin directories.
	pending map[int]attachment
	old     []string
	// inherited is what an earlier agent left forwarding: its lease end
	// (zero when unknown) and whether there is anything.
	inheritedUntil time.Time
	inherited      bool
}

type attachment struct {
	ifc  Interface
	link link.Link
}

// New loads the program and its empty maps into the kernel and logs the
// kernel memory they hold. Nothing is attached until Apply programs a
// Service. With Config.PinPath it first adopts what an earlier agent of
// the same generation pinned there: its maps, with the state they hold,
// and its links, which stay attached; links of another generation keep
// forwarding on their own program until the first Apply (Inherited).
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
	opts := bpf.LoadOptions{Limits: cfg.Limits, CsumIPv6: csumIPv6}
	d := &Dataplane{
		cfg:        cfg,
		log:        log,
		hints:      make(chan struct{}, 1),
		current:    newState(),
		links:      map[int]attachment{},
		pending:    map[int]attachment{},
		exhaustion: map[exhaustionKey]exhaustionSeen{},
	}
	if err := d.open(opts); err != nil {
		return nil, err
	}
	locked, err := bpf.LockedMemory(d.objs)
	if err != nil {
		d.closeAll()
		return nil, fmt.Errorf("load the eBPF dataplane: %w", err)
	}
	d.locked = locked
	log.Info("dataplane loaded", "locked_bytes", locked, "service_keys", cfg.Limits.Services,
		"backend_entries", cfg.Limits.Backends, "flows", cfg.Limits.Flows, "csum_ipv6_flag", csumIPv6,
		"pinned", d.pin != nil, "adopted", d.applied, "adopted_service_ports", d.services, "inherited_links", len(d.links)+len(d.pending))
	return d, nil
}

// Renew sets until when the programmed backends may take new flows: the
// end of the lease under which a leader confirmed them. Past it the
// program refuses every new flow (DropLeaseExpired) while open flows keep
// their backends, also when the maps outlive the agent. A dataplane that
// was never renewed refuses new flows.
func (d *Dataplane) Renew(until time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return errors.New("the dataplane is stopped")
	}
	d.lease = leaseAt(until)
	if d.current.node == (bpf.VipConfig{}) || d.current.node.Lease == d.lease {
		return nil
	}
	next := d.current.node
	next.Lease = d.lease
	if err := d.write(update{mapConfig, uint32(0), next}); err != nil {
		return err
	}
	d.current.node = next
	return nil
}

// LockedMemory returns the bytes of kernel memory the program's maps
// hold, as the kernel accounted them at load; they hold it whole from the
// start, Services or not.
func (d *Dataplane) LockedMemory() uint64 { return d.locked }

func (d *Dataplane) now() time.Time { return d.cfg.Now() }

// Apply programs exactly services, writing only the map entries that
// change, and attaches or detaches the program when Services appear or
// all disappear. Existing flows keep their backends; new flows use the
// new ready set, and so does a new connection on a client tuple an
// earlier flow used (a reused source port). On error nothing is changed,
// or (for a kernel error midway) the maps hold a mix that the next Apply
// converges.
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
	if next.node != (bpf.VipConfig{}) {
		next.node.Lease = d.lease
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
	d.applied = true
	if d.pin != nil && !d.committed {
		if err := d.pin.commit(); err != nil {
			// The next agent finds no generation to adopt and takes this
			// program's links over as another generation's.
			d.pinErr = err
			d.log.Warn("dataplane pins not committed", "err", err)
		}
		d.committed = true
	}
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
	flags := ebpf.UpdateAny
	if u.m == mapServices || u.m == mapBackends {
		// In place, under the entry's lock: a plain update would recycle
		// the replaced element for the next write while a packet may still
		// be reading it (see vip.c).
		flags = ebpf.UpdateLock
	}
	if err := m.Update(u.key, u.val, flags); err != nil {
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
// the dataplane (Stop: a pinned one with Services keeps forwarding).
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
