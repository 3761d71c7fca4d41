// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"podmin.dev/podmin/bpf"
)

// Protocol is an IP protocol number the dataplane forwards.
type Protocol uint8

// The protocols a Service port may use.
const (
	TCP Protocol = 6
	UDP Protocol = 17
)

func (p Protocol) String() string {
	switch p {
	case TCP:
		return "TCP"
	case UDP:
		return "UDP"
	}
	return fmt.Sprintf("protocol %d", uint8(p))
}

// Port is one Service port: traffic to the VIP on Port goes to TargetPort
// on a backend.
type Port struct {
	Protocol   Protocol
	Port       uint16
	TargetPort uint16
}

// Service is one namespaced Service as the dataplane sees it.
type Service struct {
	// Namespace and Name identify the Service in errors and logs.
	Namespace, Name string
	// VIP is the Service's IPv6 virtual address.
	VIP   netip.Addr
	Ports []Port
	// Backends are the ready backends' addresses. Order does not matter;
	// an empty list makes new flows fail closed.
	Backends []netip.Addr
}

// state is the complete content of the program's maps.
type state struct {
	node     bpf.VipConfig
	vips     map[bpf.VipAddr]uint32
	services map[bpf.VipServiceKey]bpf.VipService
	backends map[bpf.VipBackendKey]bpf.VipBackend
}

func newState() *state {
	return &state{
		vips:     map[bpf.VipAddr]uint32{},
		services: map[bpf.VipServiceKey]bpf.VipService{},
		backends: map[bpf.VipBackendKey]bpf.VipBackend{},
	}
}

// addr converts an IPv6 address to the program's layout: the raw bytes
// read as native-endian words, as the C code copies them.
func addr(a netip.Addr) bpf.VipAddr {
	b := a.As16()
	var v bpf.VipAddr
	for i := range v.W {
		v.W[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return v
}

// netAddr is the inverse of addr.
func netAddr(v bpf.VipAddr) netip.Addr {
	var b [16]byte
	for i, w := range v.W {
		binary.NativeEndian.PutUint32(b[4*i:], w)
	}
	return netip.AddrFrom16(b)
}

// port converts a port to network byte order as the program stores it.
func port(p uint16) uint16 {
	return binary.NativeEndian.Uint16(binary.BigEndian.AppendUint16(nil, p))
}

// compile turns services into map state within the map sizes of limits.
// Service keys that exist in prev keep their ids, so an unchanged Service
// causes no writes; backends are sorted, so every node maps a flow to the
// same backend.
func compile(services []Service, node netip.Addr, limits bpf.Limits, prev *state) (*state, error) {
	next := newState()
	type entry struct {
		key      bpf.VipServiceKey
		backends []netip.Addr
		target   uint16
	}
	var entries []entry
	owner := map[bpf.VipServiceKey]string{}
	nbackends := 0
	for _, s := range services {
		name := s.Namespace + "/" + s.Name
		if !s.VIP.Is6() || s.VIP.Is4In6() || s.VIP.Zone() != "" {
			return nil, fmt.Errorf("service %s: VIP %v is not an IPv6 address", name, s.VIP)
		}
		backends := slices.Clone(s.Backends)
		for _, b := range backends {
			if !b.Is6() || b.Is4In6() || b.Zone() != "" {
				return nil, fmt.Errorf("service %s: backend %v is not an IPv6 address", name, b)
			}
		}
		slices.SortFunc(backends, netip.Addr.Compare)
		backends = slices.Compact(backends)
		for _, p := range s.Ports {
			if p.Protocol != TCP && p.Protocol != UDP {
				return nil, fmt.Errorf("service %s: %v is not supported: use TCP or UDP", name, p.Protocol)
			}
			if p.Port == 0 || p.TargetPort == 0 {
				return nil, fmt.Errorf("service %s: port %d->%d: ports range from 1 through 65535", name, p.Port, p.TargetPort)
			}
			k := bpf.VipServiceKey{Vip: addr(s.VIP), Port: port(p.Port), Proto: uint8(p.Protocol)}
			if other, dup := owner[k]; dup {
				return nil, fmt.Errorf("service %s: %v %s port %d is also used by service %s", name, s.VIP, p.Protocol, p.Port, other)
			}
			owner[k] = name
			entries = append(entries, entry{key: k, backends: backends, target: p.TargetPort})
			next.vips[k.Vip]++
			nbackends += len(backends)
		}
	}
	if len(entries) > 0 && (!node.Is6() || node.Is4In6() || node.IsUnspecified()) {
		return nil, fmt.Errorf("the node IPv6 address is unknown (%v): the dataplane source-NATs Service traffic to it", node)
	}
	// Every VIP has a port, so the VIP map, as large as the Service-key
	// map, cannot overflow first.
	switch {
	case len(entries) > int(limits.Services):
		return nil, fmt.Errorf("%d Service ports exceed the dataplane limit of %d Service keys (at most %d can be configured)", len(entries), limits.Services, bpf.MaxLimits.Services)
	case nbackends > int(limits.Backends):
		return nil, fmt.Errorf("%d backend entries exceed the dataplane limit of %d (at most %d can be configured)", nbackends, limits.Backends, bpf.MaxLimits.Backends)
	}
	if len(entries) > 0 {
		next.node = bpf.VipConfig{Node: addr(node)}
	}

	// Keep ids of surviving keys; give new keys the lowest ids that no
	// current key holds, so a Service being removed never sees a new
	// Service's backends, in a deterministic order.
	used := map[uint32]bool{}
	for _, old := range prev.services {
		used[old.Id] = true
	}
	slices.SortFunc(entries, func(a, b entry) int { return compareKeys(a.key, b.key) })
	nextID := uint32(0)
	for _, e := range entries {
		svc, ok := prev.services[e.key]
		if !ok {
			for used[nextID] {
				nextID++
			}
			svc.Id = nextID
			used[nextID] = true
		}
		svc.Count = uint32(len(e.backends))
		next.services[e.key] = svc
		for i, b := range e.backends {
			next.backends[bpf.VipBackendKey{Service: svc.Id, Slot: uint32(i)}] = bpf.VipBackend{Addr: addr(b), Port: port(e.target)}
		}
	}
	return next, nil
}

func compareKeys(a, b bpf.VipServiceKey) int {
	return cmp.Or(netAddr(a.Vip).Compare(netAddr(b.Vip)), cmp.Compare(a.Proto, b.Proto), cmp.Compare(a.Port, b.Port))
}
