// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/cilium/ebpf"

	"podmin.dev/podmin/bpf"
)

// load loads fresh objects, saying when the verifier refused them.
func load(opts bpf.LoadOptions) (*bpf.VipObjects, error) {
	objs, err := bpf.Load(opts)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load the eBPF dataplane: the kernel verifier rejected it: %w", err)
		}
		return nil, fmt.Errorf("load the eBPF dataplane (needs root or CAP_BPF and CAP_NET_ADMIN): %w", err)
	}
	return objs, nil
}

// open loads the objects, pinned (adopting this generation's pins and the
// pinned links) when it can, unpinned otherwise.
func (d *Dataplane) open(opts bpf.LoadOptions) error {
	loadFresh := func() (*bpf.VipObjects, error) { return load(opts) }
	if d.cfg.PinPath == "" {
		objs, err := loadFresh()
		d.objs = objs
		return err
	}
	gen, err := bpf.Generation(opts)
	if err == nil {
		err = checkBPFFS(d.cfg.PinPath)
	}
	if err != nil {
		return d.unpinned(fmt.Errorf("the dataplane is not pinned, so an agent restart interrupts Service traffic: %w", err), loadFresh)
	}
	p := &pins{root: d.cfg.PinPath, gen: gen, log: d.log}
	objs, adopted, err := p.open(opts, loadFresh)
	var pe errPinning
	switch {
	case errors.As(err, &pe):
		// An earlier agent's pinned program would run before this
		// unpinned one on every interface, on maps nobody renews.
		if removed, rerr := RemovePinned(d.cfg.PinPath); removed || rerr != nil {
			d.log.Warn("removed the pinned dataplane an earlier agent left, since this one cannot pin", "path", d.cfg.PinPath, "err", rerr)
		}
		d.objs = objs
		return d.unpinned(fmt.Errorf("the dataplane is not pinned, so an agent restart interrupts Service traffic: %w", err), loadFresh)
	case err != nil:
		return err
	}
	d.objs, d.pin, d.applied, d.committed = objs, p, adopted, adopted
	if adopted {
		s, err := readState(objs)
		if err != nil {
			d.closeAll()
			return err
		}
		d.current, d.services, d.lease = s, len(s.services), s.node.Lease
	}
	err = inNetNS(d.cfg.NetNS, func() error {
		ours, others, err := p.links(objs.PodminVip)
		if err != nil {
			return err
		}
		if adopted {
			d.links = ours
		} else {
			// Links running this program outside a committed generation
			// cannot be: treat them as another generation's.
			maps.Copy(others, ours)
		}
		d.pending = others
		return nil
	})
	if err != nil {
		d.closeAll()
		return fmt.Errorf("adopt the pinned dataplane links: %w", err)
	}
	d.old = p.oldGenerations()
	switch {
	case adopted && d.services > 0:
		d.inherited, d.inheritedUntil = true, leaseTime(d.lease)
	case !adopted && len(d.pending) > 0:
		d.inherited = true
	}
	return nil
}

// unpinned runs without pins (loading the objects with load unless they
// are loaded) and records why.
func (d *Dataplane) unpinned(why error, load func() (*bpf.VipObjects, error)) error {
	if d.objs == nil {
		objs, err := load()
		if err != nil {
			return err
		}
		d.objs = objs
	}
	d.pinErr = why
	d.log.Warn("dataplane running unpinned", "err", why)
	return nil
}

// PinProblem returns why the dataplane is not pinned although
// Config.PinPath asked for it (or why some link could not be pinned);
// nil when everything is pinned or pinning was not asked for. The agent
// names it in /readyz.
func (d *Dataplane) PinProblem() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pinErr
}

// Inherited reports whether an earlier agent's dataplane is forwarding
// Service traffic on this node (adopted maps with Services, or links of
// another generation waiting for the first Apply), and until when its
// lease lets it take new flows; a zero time means unknown (another
// generation's maps are not read). The caller keeps that state until it
// has a leader's live snapshot to Apply, or the lease has run out.
func (d *Dataplane) Inherited() (until time.Time, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inheritedUntil, d.inherited
}

// Stop releases the process's hold on the program, its maps and links.
// A pinned dataplane with Services stays attached and keeps forwarding
// under its lease, for the next agent to adopt; an unpinned one, or one
// without Services, is detached everywhere and its pins removed. Links
// of an earlier generation that were never taken over stay as they are.
// It is safe to call more than once.
func (d *Dataplane) Stop() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return nil
	}
	d.stopped = true
	if d.pin != nil && d.committed && d.services > 0 {
		d.log.Info("dataplane left pinned and attached for the next agent", "path", d.pin.root, "service_ports", d.services)
		return d.closeAll()
	}
	for idx := range d.links {
		d.detach(idx)
	}
	if d.pin != nil {
		dir := d.pin.newDir()
		if d.committed {
			dir = d.pin.genDir()
		}
		if err := os.RemoveAll(dir); err != nil {
			d.log.Warn("dataplane pins not removed", "path", dir, "err", err)
		}
	}
	return d.closeAll()
}

// Remove detaches everything this dataplane or an earlier agent's left
// on the node, removes every pin and stops the dataplane: the explicit
// way to take the dataplane off a node.
func (d *Dataplane) Remove() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return errors.New("the dataplane is stopped")
	}
	d.stopped = true
	for idx := range d.links {
		d.detach(idx)
	}
	for idx, a := range d.pending {
		delete(d.pending, idx)
		_ = a.link.Unpin()
		_ = a.link.Close()
	}
	err := d.closeAll()
	if d.pin != nil {
		_, rerr := RemovePinned(d.pin.root)
		err = errors.Join(err, rerr)
	}
	return err
}

// closeAll closes the process's descriptors without unpinning anything.
func (d *Dataplane) closeAll() error {
	for _, a := range d.links {
		_ = a.link.Close()
	}
	for _, a := range d.pending {
		_ = a.link.Close()
	}
	return d.objs.Close()
}
