// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

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
			if d.applied && d.takeOver(ifc) {
				keep[ifc.Index] = true
				continue
			}
			l, err := link.AttachTCX(link.TCXOptions{
				Interface: ifc.Index,
				Program:   d.objs.PodminVip,
				Attach:    ebpf.AttachTCXIngress,
			})
			if err != nil {
				errs = append(errs, fmt.Errorf("attach the dataplane to %s: %w", ifc.Name, err))
				continue
			}
			// The new link runs beside another generation's on this
			// interface until that one is released below.
			d.links[ifc.Index] = attachment{ifc: ifc, link: l}
			d.pinLink(ifc.Index)
			keep[ifc.Index] = true
			d.log.Info("dataplane attached", "interface", ifc.Name)
		}
		for idx := range d.links {
			if !keep[idx] {
				d.detach(idx)
			}
		}
		if d.applied {
			d.releaseEarlier()
		}
		return errors.Join(errs...)
	})
}

// takeOver moves another generation's link on ifc to this program: the
// kernel swaps the program in place, so packets always meet one of the
// two. It reports whether ifc is now attached that way.
func (d *Dataplane) takeOver(ifc Interface) bool {
	a, ok := d.pending[ifc.Index]
	if !ok {
		return false
	}
	delete(d.pending, ifc.Index)
	if !attached(a.link, ifc.Index) {
		_ = a.link.Unpin()
		_ = a.link.Close()
		return false
	}
	if err := a.link.Update(d.objs.PodminVip); err != nil {
		// Released by releaseEarlier once this program is attached beside.
		d.pending[ifc.Index] = a
		d.log.Warn("dataplane could not take over an earlier program's attachment: attaching beside it", "interface", ifc.Name, "err", err)
		return false
	}
	d.links[ifc.Index] = attachment{ifc: ifc, link: a.link}
	d.log.Info("dataplane took over an earlier program's attachment", "interface", ifc.Name)
	return true
}

// releaseEarlier detaches the earlier generation's links no interface
// wants any more and, once none is left, removes its pins.
func (d *Dataplane) releaseEarlier() {
	for idx, a := range d.pending {
		delete(d.pending, idx)
		_ = a.link.Unpin()
		_ = a.link.Close()
		d.log.Info("dataplane detached an earlier program", "interface", a.ifc.Name)
	}
	for _, dir := range d.old {
		if err := os.RemoveAll(dir); err != nil {
			d.log.Warn("earlier dataplane pins not removed", "path", dir, "err", err)
		}
	}
	d.old = nil
}

// pinLink pins a new link so it outlives the process; one that cannot be
// pinned works until the process ends, which PinProblem reports.
func (d *Dataplane) pinLink(idx int) {
	if d.pin == nil {
		return
	}
	a := d.links[idx]
	path := d.pin.linkPath(idx)
	if p, ok := d.pending[idx]; ok {
		// An earlier program's link that could not be taken over: it
		// stays attached until releaseEarlier closes it, without the pin.
		_ = p.link.Unpin()
	}
	err := a.link.Pin(path)
	if errors.Is(err, fs.ErrExist) {
		// A pin no attachment of this agent holds: a dead interface's.
		_ = os.Remove(path)
		err = a.link.Pin(path)
	}
	if err != nil {
		d.pinErr = fmt.Errorf("the dataplane's attachment to %s is not pinned, so an agent restart detaches it: %w", a.ifc.Name, err)
		d.log.Warn("dataplane link not pinned", "interface", a.ifc.Name, "err", err)
	}
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
	if err := a.link.Unpin(); err != nil {
		d.log.Warn("dataplane link not unpinned", "interface", a.ifc.Name, "err", err)
	}
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
