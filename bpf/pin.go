// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/cilium/ebpf"
)

// pinLayout versions how Pin lays the objects out in a directory; a new
// layout is a new generation, so no loader reads pins it did not write.
const pinLayout = "podmin-vip-pins/1"

// ProgramPin is the name the program is pinned under; the maps are
// pinned under their names (VipMap*).
const ProgramPin = "program"

// Generation names what a load with o creates: a digest of the compiled
// object, the map limits, the load options and the pin layout. Pinned
// objects are adopted only by a loader of the same generation, the one
// that knows their program and the layout of their maps.
func Generation(o LoadOptions) (string, error) {
	if err := Built(); err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(pinLayout))
	h.Write([]byte{0})
	h.Write(_VipBytes)
	var b []byte
	b = binary.BigEndian.AppendUint32(b, o.Limits.Services)
	b = binary.BigEndian.AppendUint32(b, o.Limits.Backends)
	b = binary.BigEndian.AppendUint32(b, o.Limits.Flows)
	b = append(b, boolByte(o.CsumIPv6))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// mapsOf lists the maps of objs by the names they are pinned under.
func mapsOf(objs *VipObjects) map[string]**ebpf.Map {
	return map[string]**ebpf.Map{
		VipMapBackends: &objs.Backends, VipMapConfig: &objs.Config, VipMapExhausted: &objs.Exhausted,
		VipMapForwardFlows: &objs.ForwardFlows, VipMapReverseFlows: &objs.ReverseFlows,
		VipMapServices: &objs.Services, VipMapStats: &objs.Stats, VipMapVips: &objs.Vips,
	}
}

// Pin pins the program and every map of objs in dir, an existing
// directory on a bpf filesystem, so they outlive the process.
func Pin(objs *VipObjects, dir string) error {
	if err := objs.PodminVip.Pin(filepath.Join(dir, ProgramPin)); err != nil {
		return fmt.Errorf("pin the eBPF program: %w", err)
	}
	for name, m := range mapsOf(objs) {
		if err := (*m).Pin(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("pin the eBPF map %s: %w", name, err)
		}
	}
	return nil
}

// LoadPinned opens the program and maps Pin left in dir, which a load
// with o must have created: every map must have the type, sizes and flags
// o gives it, and the program must use exactly these maps. Anything else
// is an error and nothing stays open.
func LoadPinned(dir string, o LoadOptions) (_ *VipObjects, err error) {
	spec, err := LoadVip()
	if err != nil {
		return nil, err
	}
	for name, n := range o.Limits.mapSizes() {
		spec.Maps[name].MaxEntries = n
	}
	objs := new(VipObjects)
	defer func() {
		if err != nil {
			closeAll(objs)
		}
	}()
	if objs.PodminVip, err = ebpf.LoadPinnedProgram(filepath.Join(dir, ProgramPin), nil); err != nil {
		return nil, fmt.Errorf("open the pinned eBPF program: %w", err)
	}
	if objs.PodminVip.Type() != ebpf.SchedCLS {
		return nil, fmt.Errorf("the pinned eBPF program is of type %v, not %v", objs.PodminVip.Type(), ebpf.SchedCLS)
	}
	var ids []ebpf.MapID
	for name, m := range mapsOf(objs) {
		if *m, err = ebpf.LoadPinnedMap(filepath.Join(dir, name), nil); err != nil {
			return nil, fmt.Errorf("open the pinned eBPF map %s: %w", name, err)
		}
		if err := spec.Maps[name].Compatible(*m); err != nil {
			return nil, fmt.Errorf("the pinned eBPF map %s is not this program's: %w", name, err)
		}
		info, err := (*m).Info()
		if err != nil {
			return nil, fmt.Errorf("the pinned eBPF map %s: %w", name, err)
		}
		id, ok := info.ID()
		if !ok {
			return nil, fmt.Errorf("the pinned eBPF map %s: the kernel reports no ID", name)
		}
		ids = append(ids, id)
	}
	info, err := objs.PodminVip.Info()
	if err != nil {
		return nil, fmt.Errorf("the pinned eBPF program: %w", err)
	}
	used, ok := info.MapIDs()
	if !ok {
		return nil, errors.New("the pinned eBPF program: the kernel does not say which maps it uses")
	}
	for _, id := range ids {
		if !slices.Contains(used, id) {
			return nil, fmt.Errorf("the pinned eBPF program does not use the pinned map %d: the pins do not belong together", id)
		}
	}
	return objs, nil
}

// closeAll closes whatever objs holds; nil fields are skipped.
func closeAll(objs *VipObjects) {
	if objs.PodminVip != nil {
		objs.PodminVip.Close()
	}
	for _, m := range mapsOf(objs) {
		if *m != nil {
			(*m).Close()
		}
	}
}
