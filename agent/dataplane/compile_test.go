// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"net/netip"
	"testing"

	"podmin.dev/podmin/bpf"
)

func TestCompileRejects(t *testing.T) {
	good := service(backend1)
	for _, tc := range []struct {
		name string
		svcs []Service
		node netip.Addr
		want string
	}{
		{"IPv4 VIP", []Service{{Namespace: "a", Name: "b", VIP: netip.MustParseAddr("10.0.0.1"), Ports: good.Ports}}, nodeIP, "service a/b: VIP 10.0.0.1 is not an IPv6 address"},
		{"IPv4 backend", []Service{{Namespace: "a", Name: "b", VIP: vip, Ports: good.Ports, Backends: []netip.Addr{netip.MustParseAddr("10.0.0.2")}}}, nodeIP, "service a/b: backend 10.0.0.2 is not an IPv6 address"},
		{"SCTP", []Service{{Namespace: "a", Name: "b", VIP: vip, Ports: []Port{{Protocol: 132, Port: 1, TargetPort: 1}}}}, nodeIP, "service a/b: protocol 132 is not supported: use TCP or UDP"},
		{"port 0", []Service{{Namespace: "a", Name: "b", VIP: vip, Ports: []Port{{Protocol: TCP, Port: 0, TargetPort: 1}}}}, nodeIP, "service a/b: port 0->1: ports range from 1 through 65535"},
		{"duplicate", []Service{good, {Namespace: "x", Name: "y", VIP: vip, Ports: good.Ports[:1]}}, nodeIP, "service x/y: fd50:6f64:6d69:0:1234:5678:9abc:def0 TCP port 80 is also used by service product/frontend"},
		{"no node address", []Service{good}, netip.Addr{}, "the node IPv6 address is unknown (invalid IP): the dataplane source-NATs Service traffic to it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compile(tc.svcs, tc.node, bpf.MaxLimits, newState())
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	// No Services need no node address.
	if _, err := compile(nil, netip.Addr{}, bpf.MaxLimits, newState()); err != nil {
		t.Fatalf("empty state without a node address: %v", err)
	}
}

// TestCompileLimits refuses Service ports and backend entries beyond the
// configured limits, and takes everything up to them.
func TestCompileLimits(t *testing.T) {
	var svcs []Service
	base := vip.As16()
	for i := range bpf.MaxLimits.Services + 1 {
		a := base
		a[14], a[15] = byte(i>>8), byte(i)
		a[13] = byte(i >> 16)
		svcs = append(svcs, Service{Namespace: "n", Name: "s", VIP: netip.AddrFrom16(a), Ports: []Port{{Protocol: TCP, Port: 80, TargetPort: 80}}})
	}
	_, err := compile(svcs, nodeIP, bpf.MaxLimits, newState())
	if want := "65537 Service ports exceed the dataplane limit of 65536 Service keys (at most 65536 can be configured)"; err == nil || err.Error() != want {
		t.Fatalf("65537 Services: %v, want %q", err, want)
	}
	if _, err := compile(svcs[:bpf.MaxLimits.Services], nodeIP, bpf.MaxLimits, newState()); err != nil {
		t.Fatalf("65536 Services: %v", err)
	}

	small := bpf.Limits{Services: 6, Backends: 11, Flows: 1}
	if _, err := compile([]Service{service(backend1)}, nodeIP, small, newState()); err != nil {
		t.Fatalf("6 ports with a backend each within limits of 6 and 11: %v", err)
	}
	_, err = compile([]Service{service(backend1, backend2)}, nodeIP, small, newState())
	if want := "12 backend entries exceed the dataplane limit of 11 (at most 65536 can be configured)"; err == nil || err.Error() != want {
		t.Fatalf("12 backend entries: %v, want %q", err, want)
	}
	small.Services = 5
	_, err = compile([]Service{service(backend1)}, nodeIP, small, newState())
	if want := "6 Service ports exceed the dataplane limit of 5 Service keys (at most 65536 can be configured)"; err == nil || err.Error() != want {
		t.Fatalf("6 Service ports: %v, want %q", err, want)
	}
}

// TestCompileDeterministic gives every node the same slots for the same
// ready set, whatever order the backends arrive in, and keeps ids of
// surviving Service keys.
func TestCompileDeterministic(t *testing.T) {
	a, err := compile([]Service{service(backend2, backend1, backend2)}, nodeIP, bpf.MaxLimits, newState())
	if err != nil {
		t.Fatal(err)
	}
	b, err := compile([]Service{service(backend1, backend2)}, nodeIP, bpf.MaxLimits, newState())
	if err != nil {
		t.Fatal(err)
	}
	if len(diff(a, b)) != 0 {
		t.Errorf("same ready set compiled differently: %v", diff(a, b))
	}
	for k, v := range a.backends {
		if k.Slot == 0 && netAddr(v.Addr) != backend1 {
			t.Errorf("slot 0 holds %v, want the lowest address", netAddr(v.Addr))
		}
	}

	other := Service{Namespace: "a", Name: "other", VIP: netip.MustParseAddr("fd50:6f64:6d69::1"), Ports: []Port{{Protocol: UDP, Port: 53, TargetPort: 53}}, Backends: []netip.Addr{backend1}}
	c, err := compile([]Service{service(backend1, backend2), other}, nodeIP, bpf.MaxLimits, a)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range a.services {
		if c.services[k].Id != v.Id {
			t.Errorf("service id of a surviving key changed from %d to %d", v.Id, c.services[k].Id)
		}
	}
	ups := diff(a, c)
	if len(ups) != 3 { // one backend slot, one service key, one VIP
		t.Errorf("adding a one-port Service made %d updates: %v", len(ups), ups)
	}
	// Removing it again deletes exactly those three.
	if ups := diff(c, a); len(ups) != 3 {
		t.Errorf("removing it made %d updates: %v", len(ups), ups)
	}
}

func TestDiffOrder(t *testing.T) {
	two, _ := compile([]Service{service(backend1, backend2)}, nodeIP, bpf.MaxLimits, newState())
	one, _ := compile([]Service{service(backend2)}, nodeIP, bpf.MaxLimits, two)
	// Lowering the count must come before deleting the slot it exposed.
	ups := diff(two, one)
	lowered, deleted := -1, -1
	for i, u := range ups {
		if u.m == mapServices && u.val != nil && lowered < 0 {
			lowered = i
		}
		if u.m == mapBackends && u.val == nil && deleted < 0 {
			deleted = i
		}
	}
	if lowered < 0 || deleted < 0 || lowered > deleted {
		t.Errorf("updates %v: counts must be lowered before slots are deleted", ups)
	}
}

// TestUnknownRewritesEverything: after a failed write the next diff must
// rewrite every entry of the target and delete every other old entry,
// whatever part of the failed update reached the kernel.
func TestUnknownRewritesEverything(t *testing.T) {
	other := Service{Namespace: "a", Name: "old", VIP: netip.MustParseAddr("fd50:6f64:6d69::9"), Ports: []Port{{Protocol: TCP, Port: 1, TargetPort: 1}}, Backends: []netip.Addr{backend2}}
	prev, err := compile([]Service{other, service(backend1)}, nodeIP, bpf.MaxLimits, newState())
	if err != nil {
		t.Fatal(err)
	}
	next, err := compile([]Service{service(backend1, backend2)}, nodeIP, bpf.MaxLimits, prev)
	if err != nil {
		t.Fatal(err)
	}
	u := unknown(prev, next)
	again, err := compile([]Service{service(backend1, backend2)}, nodeIP, bpf.MaxLimits, u)
	if err != nil {
		t.Fatal(err)
	}
	if len(diff(next, again)) != 0 {
		t.Fatal("compiling against the unknown state assigned other ids")
	}
	writes, deletes := map[mapName]int{}, map[mapName]int{}
	for _, up := range diff(u, again) {
		if up.val == nil {
			deletes[up.m]++
		} else {
			writes[up.m]++
		}
	}
	if writes[mapConfig] != 1 || writes[mapVIPs] != len(next.vips) || writes[mapServices] != len(next.services) || writes[mapBackends] != len(next.backends) {
		t.Errorf("writes %v, want every entry of the target", writes)
	}
	if deletes[mapVIPs] != 1 || deletes[mapServices] != 1 || deletes[mapBackends] != 1 {
		t.Errorf("deletes %v, want the removed Service's VIP, key and backend", deletes)
	}
}

func TestCovers(t *testing.T) {
	for list, want := range map[string]bool{
		"":                  false,
		"30000-32767":       true,
		"22,30000-32767,80": true,
		"29000-40000":       true,
		"30000-32766":       false,
		"30000":             false,
		"31000-32767":       false,
	} {
		if got := covers(list, 30000, 32767); got != want {
			t.Errorf("covers(%q) = %v, want %v", list, got, want)
		}
	}
}
