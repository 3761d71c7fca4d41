// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"cmp"
	"slices"

	"podmin.dev/podmin/bpf"
)

// mapName names one of the program's maps in an update.
type mapName string

const (
	mapConfig   mapName = bpf.VipMapConfig
	mapVIPs     mapName = bpf.VipMapVips
	mapServices mapName = bpf.VipMapServices
	mapBackends mapName = bpf.VipMapBackends
)

// update is one map write (val set) or delete (val nil).
type update struct {
	m        mapName
	key, val any
}

// diff returns the writes that turn prev into next, ordered so that a
// packet never sees a Service whose count covers a missing backend slot:
// backend slots are written before the count that exposes them, counts are
// lowered before the slots above them are deleted, and a VIP appears only
// once its Services exist and disappears before them.
func diff(prev, next *state) []update {
	var ups []update
	if prev.node != next.node && next.node != (bpf.VipConfig{}) {
		ups = append(ups, update{mapConfig, uint32(0), next.node})
	}

	for _, k := range sortedKeys(next.backends, compareBackendKeys) {
		if old, ok := prev.backends[k]; !ok || old != next.backends[k] {
			ups = append(ups, update{mapBackends, k, next.backends[k]})
		}
	}
	for _, k := range sortedKeys(next.services, compareKeys) {
		if old, ok := prev.services[k]; !ok || old != next.services[k] {
			ups = append(ups, update{mapServices, k, next.services[k]})
		}
	}
	for _, k := range sortedKeys(next.vips, compareAddrs) {
		if _, ok := prev.vips[k]; !ok {
			ups = append(ups, update{mapVIPs, k, uint32(1)})
		}
	}

	for _, k := range sortedKeys(prev.vips, compareAddrs) {
		if _, ok := next.vips[k]; !ok {
			ups = append(ups, update{m: mapVIPs, key: k})
		}
	}
	for _, k := range sortedKeys(prev.services, compareKeys) {
		if _, ok := next.services[k]; !ok {
			ups = append(ups, update{m: mapServices, key: k})
		}
	}
	for _, k := range sortedKeys(prev.backends, compareBackendKeys) {
		if _, ok := next.backends[k]; !ok {
			ups = append(ups, update{m: mapBackends, key: k})
		}
	}
	return ups
}

func sortedKeys[K comparable, V any](m map[K]V, cmp func(a, b K) int) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp)
	return keys
}

func compareBackendKeys(a, b bpf.VipBackendKey) int {
	return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Slot, b.Slot))
}

func compareAddrs(a, b bpf.VipAddr) int { return netAddr(a).Compare(netAddr(b)) }
