// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"strings"
	"testing"
)

func TestExtractUpdateStrategy(t *testing.T) {
	strategy := func(v map[string]any) mutation { return set("spec.updateStrategy", v) }
	rolling := func(r map[string]any) mutation {
		return strategy(map[string]any{"type": "RollingUpdate", "rollingUpdate": r})
	}
	runExtractCases(t, []extractCase{
		{name: "default", in: ds(strategy(map[string]any{}))},
		{name: "rolling update without parameters", in: ds(strategy(map[string]any{"type": "RollingUpdate"}))},
		{name: "absolute", in: ds(rolling(map[string]any{"maxUnavailable": 2}))},
		{name: "percentage", in: ds(rolling(map[string]any{"maxUnavailable": "25%"}))},
		{name: "maxSurge zero", in: ds(rolling(map[string]any{"maxUnavailable": 1, "maxSurge": 0}))},
		{name: "OnDelete", in: ds(strategy(map[string]any{"type": "OnDelete"})), want: "DaemonSet spec.updateStrategy.type: OnDelete is not supported: a node replaces its static Pod only for a new revision, and Podmin has no API to delete Pods with; use RollingUpdate (the default), whose maxUnavailable paces the update across the NodeGroup"},
		{name: "unknown type", in: ds(strategy(map[string]any{"type": "Recreate"})), want: `DaemonSet spec.updateStrategy.type: "Recreate" is not a DaemonSet update strategy: use RollingUpdate`},
		{name: "maxSurge", in: ds(rolling(map[string]any{"maxSurge": 1})), want: "DaemonSet spec.updateStrategy.rollingUpdate.maxSurge: is not supported: a node runs one static Pod per deployment, so the old and the new Pod cannot run side by side; remove it and pace the update with maxUnavailable"},
		{name: "zero", in: ds(rolling(map[string]any{"maxUnavailable": 0})), want: `DaemonSet spec.updateStrategy.rollingUpdate.maxUnavailable: "0" is not a positive number of nodes or a percentage: use e.g. 1, 2 or 25% (0 would never let a node update)`},
		{name: "zero percent", in: ds(rolling(map[string]any{"maxUnavailable": "0%"})), want: `DaemonSet spec.updateStrategy.rollingUpdate.maxUnavailable: "0%" is not a percentage from 1% to 100%: use e.g. 25% or an absolute number of nodes`},
		{name: "over 100 percent", in: ds(rolling(map[string]any{"maxUnavailable": "150%"})), want: `DaemonSet spec.updateStrategy.rollingUpdate.maxUnavailable: "150%" is not a percentage from 1% to 100%: use e.g. 25% or an absolute number of nodes`},
		{name: "number as string", in: ds(rolling(map[string]any{"maxUnavailable": "2"})), want: `DaemonSet spec.updateStrategy.rollingUpdate.maxUnavailable: "2" is a string but not a percentage: write a number of nodes without quotes, or a percentage such as 25%`},
		{name: "reserved annotation", in: ds(set("spec.template.metadata.annotations", map[string]any{MaxUnavailableAnnotation: "3"})), want: `DaemonSet spec.template.metadata.annotations["podmin.dev/max-unavailable"]: is reserved: Podmin sets it; remove it`},
	})
}

// Only a value other than the default reaches the Pod payload, so a
// DaemonSet that keeps the default keeps the bytes (and revision) it had
// before rolling updates existed.
func TestUpdateStrategyAnnotation(t *testing.T) {
	plain, err := Extract(ds(), ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	explicitDefault, err := Extract(ds(set("spec.updateStrategy", map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": 1}})), ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(plain.PodYAML) != string(explicitDefault.PodYAML) || strings.Contains(string(plain.PodYAML), MaxUnavailableAnnotation) {
		t.Fatalf("the default maxUnavailable changed the payload:\n%s\n%s", plain.PodYAML, explicitDefault.PodYAML)
	}
	for v, want := range map[any]string{2: "2", "25%": "25%"} {
		r, err := Extract(ds(set("spec.updateStrategy", map[string]any{"rollingUpdate": map[string]any{"maxUnavailable": v}})), ExtractOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := PodMaxUnavailable(r.PodYAML)
		if err != nil || got.String() != want {
			t.Errorf("maxUnavailable %v: payload carries %v, %v:\n%s", v, got, err, r.PodYAML)
		}
	}
	if got, err := PodMaxUnavailable(plain.PodYAML); err != nil || got != DefaultMaxUnavailable {
		t.Errorf("default payload: %v, %v", got, err)
	}
	if _, err := PodMaxUnavailable([]byte("metadata:\n  annotations:\n    podmin.dev/max-unavailable: lots\n")); err == nil {
		t.Error("an invalid annotation was accepted")
	}
}

// Percentages round up as Kubernetes' DaemonSet controller rounds them.
func TestAllowedUnavailable(t *testing.T) {
	for _, tc := range []struct {
		v     string
		nodes int
		want  int
	}{
		{"1", 3, 1}, {"2", 3, 2}, {"5", 3, 5},
		{"25%", 3, 1}, {"34%", 3, 2}, {"50%", 3, 2}, {"66%", 3, 2}, {"67%", 3, 3}, {"100%", 3, 3},
		{"10%", 10, 1}, {"11%", 10, 2}, {"1%", 1000, 10}, {"1%", 1001, 11}, {"30%", 7, 3},
		{"25%", 0, 1},
	} {
		v, err := ParseMaxUnavailable(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := AllowedUnavailable(v, tc.nodes); got != tc.want {
			t.Errorf("AllowedUnavailable(%s, %d) = %d, want %d", tc.v, tc.nodes, got, tc.want)
		}
	}
}
