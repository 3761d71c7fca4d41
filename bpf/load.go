// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"bufio"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// Limits are the sizes the program's maps are created with. The kernel
// allocates hash maps whole when they are created, so they cost their
// full size in locked kernel memory from the start (see Memory).
type Limits struct {
	// Services bounds the Service keys (VIP, port, protocol); the VIP map
	// has as many entries, since every VIP has at least one port.
	Services uint32
	// Backends bounds the backend entries summed over Service keys (a
	// Service with 3 ports and 4 ready backends uses 12).
	Backends uint32
	// Flows bounds the NATed flows the node tracks at once: open flows,
	// and closed ones whose NAT port is held for the backend's TIME_WAIT.
	// Both the forward and the reverse map have this many entries; when
	// they are full, the least recently used flows are evicted.
	Flows uint32
}

// MaxLimits are the spec's bounds.
var MaxLimits = Limits{Services: 65536, Backends: 65536, Flows: 262144}

// DefaultLimits fit a small node: about 6 MiB of locked memory with two
// CPUs (see Memory).
var DefaultLimits = Limits{Services: 1024, Backends: 8192, Flows: 16384}

// Check reports a limit that is zero or above MaxLimits.
func (l Limits) Check() error {
	for _, f := range []struct {
		name     string
		v, limit uint32
	}{{"Service keys", l.Services, MaxLimits.Services}, {"backend entries", l.Backends, MaxLimits.Backends}, {"flows", l.Flows, MaxLimits.Flows}} {
		if f.v == 0 || f.v > f.limit {
			return fmt.Errorf("the dataplane's limit of %s is %d: use 1 through %d", f.name, f.v, f.limit)
		}
	}
	return nil
}

// mapSizes returns each sized map's entries under l.
func (l Limits) mapSizes() map[string]uint32 {
	return map[string]uint32{
		VipMapServices:     l.Services,
		VipMapVips:         l.Services,
		VipMapBackends:     l.Backends,
		VipMapForwardFlows: l.Flows,
		VipMapReverseFlows: l.Flows,
	}
}

// LoadOptions configure Load.
type LoadOptions struct {
	Limits Limits
	// CsumIPv6 passes BPF_F_IPV6 to every L4 checksum update, which only
	// kernels with it (6.16, and stable kernels it was backported to)
	// accept; see CsumIPv6Supported. Without it the program undoes the
	// skb->csum adjustment that older kernels make for IPv4 instead.
	CsumIPv6 bool
}

// Load creates the program and its maps, sized to o.Limits, in the
// kernel.
func Load(o LoadOptions) (*VipObjects, error) {
	if err := Built(); err != nil {
		return nil, err
	}
	if err := o.Limits.Check(); err != nil {
		return nil, err
	}
	spec, err := LoadVip()
	if err != nil {
		return nil, err
	}
	for name, n := range o.Limits.mapSizes() {
		spec.Maps[name].MaxEntries = n
	}
	if err := spec.Variables[VipVarCsumIpv6].Set(boolByte(o.CsumIPv6)); err != nil {
		return nil, fmt.Errorf("configure the eBPF program: %w", err)
	}
	objs := new(VipObjects)
	if err := spec.LoadAndAssign(objs, nil); err != nil {
		return nil, err
	}
	return objs, nil
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// BPF_F_PSEUDO_HDR and BPF_F_IPV6 of bpf_l4_csum_replace.
const (
	csumPseudoHdr = 1 << 4
	csumIPv6      = 1 << 7
)

// CsumIPv6Supported reports whether this kernel's bpf_l4_csum_replace
// accepts BPF_F_IPV6: older kernels refuse unknown flags with EINVAL. It
// runs a two-instruction program on a test packet.
func CsumIPv6Supported() (bool, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.SchedCLS,
		Instructions: asm.Instructions{
			// r1 is the packet; update the TCP checksum by nothing.
			asm.Mov.Imm(asm.R2, 14+40+16),
			asm.Mov.Imm(asm.R3, 0),
			asm.Mov.Imm(asm.R4, 0),
			asm.Mov.Imm(asm.R5, csumPseudoHdr|csumIPv6),
			asm.FnL4CsumReplace.Call(),
			asm.Return(),
		},
		License: "Apache-2.0",
	})
	if err != nil {
		return false, fmt.Errorf("probe the kernel's checksum helper: %w", err)
	}
	defer prog.Close()
	pkt := make([]byte, 14+40+20)
	pkt[12], pkt[13] = 0x86, 0xdd
	pkt[14] = 0x60
	pkt[14+6] = 6
	ret, err := prog.Run(&ebpf.RunOptions{Data: pkt})
	if err != nil {
		return false, fmt.Errorf("probe the kernel's checksum helper: %w", err)
	}
	return ret == 0, nil
}

// LockedMemory returns the kernel memory the maps of objs hold, as the
// kernel accounts it (the memlock figure of each map).
func LockedMemory(objs *VipObjects) (uint64, error) {
	var total uint64
	maps := []*ebpf.Map{objs.Backends, objs.Config, objs.Exhausted, objs.ForwardFlows,
		objs.ReverseFlows, objs.Services, objs.Stats, objs.Vips}
	for _, m := range maps {
		n, err := memlock(m)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// memlock reads a map's memlock line from the process's fdinfo.
func memlock(m *ebpf.Map) (uint64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/self/fdinfo/%d", m.FD()))
	if err != nil {
		return 0, fmt.Errorf("read map memory: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "memlock:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	if err := s.Err(); err != nil {
		return 0, fmt.Errorf("read map memory: %w", err)
	}
	return 0, errors.New("read map memory: the kernel reports no memlock figure")
}

// Kernel sizes the memory formula uses (64-bit kernels): a hash map's
// element header, bucket, and per-map fixed part.
const (
	htabElemHeader = 48
	htabBucket     = 16
	mapFixed       = 756
)

// Memory estimates the kernel memory the maps take under l on a machine
// with cpus possible CPUs, following the kernel's own accounting
// (htab_map_mem_usage, array_map_mem_usage). Every hash map is allocated
// whole: per entry a 48-byte header plus key and value (each rounded up
// to 8 bytes), plus a 16-byte bucket per power of two at or above the
// entry count. Per flow that is 112 bytes forward and 152 reverse, plus
// buckets: 296 to 328 bytes; per Service key 80, and 72 in the VIP map,
// plus buckets: 184 to 216; per backend entry 96 to 112.
func Memory(l Limits, cpus int) (uint64, error) {
	spec, err := LoadVip()
	if err != nil {
		return 0, err
	}
	sizes := l.mapSizes()
	var total uint64
	for name, m := range spec.Maps {
		if strings.HasPrefix(name, ".") { // .rodata: a few bytes
			continue
		}
		entries := uint64(m.MaxEntries)
		if n, ok := sizes[name]; ok {
			entries = uint64(n)
		}
		key, value := round8(m.KeySize), round8(m.ValueSize)
		total += mapFixed
		switch m.Type {
		case ebpf.Hash, ebpf.LRUHash:
			elems := entries
			if m.Type == ebpf.Hash { // preallocated spares, one per CPU
				elems += uint64(cpus)
			}
			total += elems*(htabElemHeader+key+value) + pow2(entries)*htabBucket
		case ebpf.Array:
			total += entries * value
		case ebpf.PerCPUArray:
			total += entries * (8 + value*uint64(cpus))
		default:
			return 0, fmt.Errorf("map %s: no memory formula for %v", name, m.Type)
		}
	}
	return total, nil
}

func round8(n uint32) uint64 { return (uint64(n) + 7) &^ 7 }

// pow2 is the smallest power of two at or above n.
func pow2(n uint64) uint64 {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len64(n-1)
}
