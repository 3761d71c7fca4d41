// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package infra

import (
	"fmt"
	"hash/fnv"
	"path/filepath"
	"slices"
	"testing"
)

// allocationGroups are NodeGroups whose names collide: a152 hashes to
// workers' netnum, which once moved workers when a152 was added. a152 has
// a dedicated NAT64; the others share their zone's.
func allocationGroups() map[string]NodeGroup {
	return map[string]NodeGroup{
		"default": ng("default", "us-west-2a", "arm64", "t4g.small", 1),
		"workers": ng("workers", "us-west-2b", "arm64", "c8g.large", 3),
		"a152":    {Name: "a152", Size: 1, DiskSize: 20, InstanceType: "t4g.small", Zone: "us-west-2b", Arch: "arm64", NAT64: "t4g.small"},
		"batch":   ng("batch", "us-west-2c", "arm64", "t4g.small", 2),
	}
}

func slot(name string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int(h.Sum32() % uint32(n))
}

// published is what setup publishes for an allocation.
func published(a Allocation) Vars {
	v := Vars{NodeGroups: map[string]NodeGroupVar{}, NAT64: map[string]NAT64Var{}}
	for n, i := range a.NodeGroups {
		v.NodeGroups[n] = NodeGroupVar{SubnetIndex: i}
	}
	for n, i := range a.NAT64 {
		v.NAT64[n] = NAT64Var{SubnetIndex: i}
	}
	return v
}

// step allocates names after prev and fails t when a NodeGroup or NAT64
// instance of both keeps no slot, or two share one.
func step(t *testing.T, names []string, prev Vars, what string) Vars {
	t.Helper()
	c := Cluster{ID: "demo", Region: "us-west-2", VPCCIDR: "10.0.0.0/16", NAT64: "t4g.nano"}
	groups := allocationGroups()
	for _, n := range names {
		c.NodeGroups = append(c.NodeGroups, groups[n])
	}
	a, err := Allocate(c, prev)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for kind, got := range map[string]map[string]int{"NodeGroup": a.NodeGroups, "NAT64": a.NAT64} {
		had := map[string]int{}
		for n, v := range prev.NodeGroups {
			if kind == "NodeGroup" {
				had[n] = v.SubnetIndex
			}
		}
		for n, v := range prev.NAT64 {
			if kind == "NAT64" {
				had[n] = v.SubnetIndex
			}
		}
		taken := map[int]string{}
		for n, i := range got {
			if old, ok := had[n]; ok && old != i {
				t.Fatalf("%s: %s %s moved from slot %d to %d (%v after %v)", what, kind, n, old, i, got, had)
			}
			if other, dup := taken[i]; dup {
				t.Fatalf("%s: %s %s and %s share slot %d", what, kind, n, other, i)
			}
			taken[i] = n
		}
	}
	if len(a.NodeGroups) != len(names) {
		t.Fatalf("%s: %d NodeGroups allocated for %v", what, len(a.NodeGroups), names)
	}
	return published(a)
}

func permutations(names []string) [][]string {
	if len(names) <= 1 {
		return [][]string{slices.Clone(names)}
	}
	var out [][]string
	for i := range names {
		rest := append(slices.Clone(names[:i]), names[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]string{names[i]}, p...))
		}
	}
	return out
}

// TestAllocationNeverMovesASubnet adds the NodeGroups one by one in every
// order, then removes them one by one in every order, publishing each
// allocation as setup does: no NodeGroup's or NAT64 instance's subnet ever
// moves while it exists.
func TestAllocationNeverMovesASubnet(t *testing.T) {
	if slot("a152", nodegroupNetnums) != slot("workers", nodegroupNetnums) {
		t.Fatal("a152 and workers no longer collide: pick names that do")
	}
	names := []string{"default", "workers", "a152", "batch"}
	orders := permutations(names)
	if len(orders) != 24 {
		t.Fatalf("%d orders", len(orders))
	}
	steps := 0
	for _, order := range orders {
		prev := Vars{}
		for i := range order {
			prev = step(t, order[:i+1], prev, fmt.Sprintf("adding %v", order[:i+1]))
			steps++
		}
		full := prev
		for _, removal := range orders {
			prev = full
			for i := 1; i < len(removal); i++ {
				prev = step(t, removal[i:], prev, fmt.Sprintf("after adding %v, keeping %v", order, removal[i:]))
				steps++
			}
		}
	}
	t.Logf("%d setups in %d orders; no subnet moved", steps, len(orders))
}

// The regression the allocation fixes: adding a152 to the published
// shared-nat64 cluster moved workers from netnum 172.
func TestAddingANodeGroupKeepsThePublishedSubnets(t *testing.T) {
	prev := readFixture(t, filepath.Join("testdata", "shared-nat64.tfvars.json"))
	tc := renderCases()[1]
	c := tc.cluster
	c.NodeGroups = append([]NodeGroup{{Name: "a152", Size: 1, DiskSize: 20, InstanceType: "t4g.small", Zone: "us-west-2b", Arch: "arm64"}}, c.NodeGroups...)
	in := baseInputs("a152", "default", "workers")
	in.Previous = prev
	v, err := BuildVars(c, in)
	if err != nil {
		t.Fatal(err)
	}
	for n, old := range prev.NodeGroups {
		if v.NodeGroups[n].SubnetIndex != old.SubnetIndex {
			t.Errorf("NodeGroup %s moved from netnum %d to %d", n, old.SubnetIndex, v.NodeGroups[n].SubnetIndex)
		}
	}
	for n, old := range prev.NAT64 {
		if v.NAT64[n].SubnetIndex != old.SubnetIndex {
			t.Errorf("NAT64 %s moved from slot %d to %d", n, old.SubnetIndex, v.NAT64[n].SubnetIndex)
		}
	}
	if got := v.NodeGroups["a152"].SubnetIndex; got == prev.NodeGroups["workers"].SubnetIndex || got == prev.NodeGroups["default"].SubnetIndex {
		t.Errorf("a152 got the taken netnum %d", got)
	}
	// Without the published variables, a152 would have taken workers'
	// netnum: the allocation is what keeps it.
	fresh, err := BuildVars(c, baseInputs("a152", "default", "workers"))
	if err != nil {
		t.Fatal(err)
	}
	if fresh.NodeGroups["a152"].SubnetIndex != prev.NodeGroups["workers"].SubnetIndex {
		t.Errorf("a fresh allocation gives a152 netnum %d, not workers' published %d", fresh.NodeGroups["a152"].SubnetIndex, prev.NodeGroups["workers"].SubnetIndex)
	}
}

// A slot freed in this setup is not handed to a new name in the same setup
// (the old subnet may still exist while the new one is created), unless
// nothing else is free.
func TestFreedSlotsWaitOneSetup(t *testing.T) {
	n := nodegroupNetnums
	got := keepSlots([]string{"new"}, map[string]int{"gone": slot("new", n)}, n)
	if got["new"] == slot("new", n) {
		t.Fatalf("new took the slot gone had in the same setup: %v", got)
	}
	got = keepSlots([]string{"x", "y"}, map[string]int{"a": 0, "b": 1}, 2)
	if len(got) != 2 || got["x"] == got["y"] {
		t.Fatalf("with no other slot free, freed slots are reused: %v", got)
	}
	got = keepSlots([]string{"keep", "new"}, map[string]int{"keep": 7, "gone": 8}, n)
	if got["keep"] != 7 || got["new"] == 8 || got["new"] == 7 {
		t.Fatalf("%v", got)
	}
}
