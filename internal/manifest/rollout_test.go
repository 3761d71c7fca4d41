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
	surge := func(r map[string]any) mutation { return rolling(r) }
	const ru = "DaemonSet spec.updateStrategy.rollingUpdate."
	const surgeWhy = "maxSurge starts the new Pod beside the old one on each node, and both cannot bind the same ports of the node's address: remove maxSurge (and pace the update with maxUnavailable)"
	runExtractCases(t, []extractCase{
		{name: "default", in: ds(strategy(map[string]any{}))},
		{name: "rolling update without parameters", in: ds(strategy(map[string]any{"type": "RollingUpdate"}))},
		{name: "absolute", in: ds(rolling(map[string]any{"maxUnavailable": 2}))},
		{name: "percentage", in: ds(rolling(map[string]any{"maxUnavailable": "25%"}))},
		{name: "maxSurge zero", in: ds(rolling(map[string]any{"maxUnavailable": 1, "maxSurge": 0}))},
		{name: "maxSurge zero percent", in: ds(rolling(map[string]any{"maxUnavailable": 1, "maxSurge": "0%"}))},
		{name: "maxSurge", in: ds(surge(map[string]any{"maxSurge": 1, "maxUnavailable": 0}))},
		{name: "maxSurge percentage", in: ds(surge(map[string]any{"maxSurge": "100%", "maxUnavailable": "0%"}))},
		{name: "OnDelete", in: ds(strategy(map[string]any{"type": "OnDelete"})), want: "DaemonSet spec.updateStrategy.type: OnDelete is not supported: a node replaces its static Pod only for a new revision, and Podmin has no API to delete Pods with; use RollingUpdate (the default), whose maxUnavailable or maxSurge paces the update across the NodeGroup"},
		{name: "unknown type", in: ds(strategy(map[string]any{"type": "Recreate"})), want: `DaemonSet spec.updateStrategy.type: "Recreate" is not a DaemonSet update strategy: use RollingUpdate`},
		{name: "maxSurge with the default maxUnavailable", in: ds(surge(map[string]any{"maxSurge": 1})),
			want: ru + "maxSurge: may not be set when maxUnavailable is not 0 (it defaults to 1): set maxUnavailable: 0 to start each node's new Pod beside its old one, or remove maxSurge to replace Pods in place"},
		{name: "maxSurge and maxUnavailable", in: ds(surge(map[string]any{"maxSurge": "10%", "maxUnavailable": 2})),
			want: ru + "maxSurge: may not be set when maxUnavailable is not 0: set maxUnavailable: 0 to start each node's new Pod beside its old one, or remove maxSurge to replace Pods in place"},
		{name: "zero", in: ds(rolling(map[string]any{"maxUnavailable": 0})),
			want: ru + "maxUnavailable: cannot be 0 when maxSurge is 0: no node could ever update; use e.g. maxUnavailable: 1, or maxSurge: 1 with maxUnavailable: 0 to start each node's new Pod beside its old one"},
		{name: "zero percent", in: ds(rolling(map[string]any{"maxUnavailable": "0%", "maxSurge": "0%"})),
			want: ru + "maxUnavailable: cannot be 0 when maxSurge is 0: no node could ever update; use e.g. maxUnavailable: 1, or maxSurge: 1 with maxUnavailable: 0 to start each node's new Pod beside its old one"},
		{name: "negative", in: ds(rolling(map[string]any{"maxUnavailable": -1})), want: ru + "maxUnavailable: -1 is negative: use a number of nodes (0 or more) or a percentage such as 25%"},
		{name: "negative surge", in: ds(surge(map[string]any{"maxSurge": -2, "maxUnavailable": 0})), want: ru + "maxSurge: -2 is negative: use a number of nodes (0 or more) or a percentage such as 25%"},
		{name: "over 100 percent", in: ds(rolling(map[string]any{"maxUnavailable": "150%"})), want: ru + `maxUnavailable: "150%" is more than 100%: use a percentage from 0% to 100% or a number of nodes`},
		{name: "surge over 100 percent", in: ds(surge(map[string]any{"maxSurge": "101%", "maxUnavailable": 0})), want: ru + `maxSurge: "101%" is more than 100%: use a percentage from 0% to 100% or a number of nodes`},
		{name: "bad percentage", in: ds(rolling(map[string]any{"maxUnavailable": "1.5%"})), want: ru + `maxUnavailable: "1.5%" is not a percentage: use e.g. 25% or a number of nodes without quotes`},
		{name: "number as string", in: ds(rolling(map[string]any{"maxUnavailable": "2"})), want: ru + `maxUnavailable: "2" is a string but not a percentage: write a number of nodes without quotes, or a percentage such as 25%`},
		{name: "surge number as string", in: ds(surge(map[string]any{"maxSurge": "1", "maxUnavailable": 0})), want: ru + `maxSurge: "1" is a string but not a percentage: write a number of nodes without quotes, or a percentage such as 25%`},
		{name: "maxSurge under hostNetwork", in: ds(surge(map[string]any{"maxSurge": 1, "maxUnavailable": 0}), set(base+".hostNetwork", true)),
			want: ru + "maxSurge: cannot be used with spec.template.spec.hostNetwork: the Pod has no address of its own; " + surgeWhy},
		{name: "maxSurge with a hostPort", in: ds(surge(map[string]any{"maxSurge": 1, "maxUnavailable": 0}),
			set(base+".containers.0.ports", []any{map[string]any{"containerPort": 8080}, map[string]any{"containerPort": 8443, "hostPort": 443}})),
			want: ru + "maxSurge: cannot be used with spec.template.spec.containers[0].ports[1].hostPort 443: " + surgeWhy},
		{name: "maxSurge zero under hostNetwork", in: ds(rolling(map[string]any{"maxSurge": 0}), set(base+".hostNetwork", true))},
		{name: "reserved annotation", in: ds(set("spec.template.metadata.annotations", map[string]any{MaxUnavailableAnnotation: "3"})), want: `DaemonSet spec.template.metadata.annotations["podmin.dev/max-unavailable"]: is reserved: Podmin sets it; remove it`},
		{name: "reserved surge annotation", in: ds(set("spec.template.metadata.annotations", map[string]any{MaxSurgeAnnotation: "1"})), want: `DaemonSet spec.template.metadata.annotations["podmin.dev/max-surge"]: is reserved: Podmin sets it; remove it`},
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
	for v, want := range map[any]string{1: "1", "30%": "30%"} {
		r, err := Extract(ds(set("spec.updateStrategy", map[string]any{"rollingUpdate": map[string]any{"maxSurge": v, "maxUnavailable": 0}})), ExtractOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st, err := PodStrategy(r.PodYAML)
		if err != nil || !st.Surges() || st.MaxSurge.String() != want || st.MaxUnavailable.String() != "0" || strings.Contains(string(r.PodYAML), MaxUnavailableAnnotation) {
			t.Errorf("maxSurge %v: payload carries %+v, %v:\n%s", v, st, err, r.PodYAML)
		}
	}
	if st, err := PodStrategy(plain.PodYAML); err != nil || st.Surges() || st.MaxUnavailable != DefaultMaxUnavailable {
		t.Errorf("default payload strategy: %+v, %v", st, err)
	}
	both := []byte("metadata:\n  annotations:\n    podmin.dev/max-unavailable: \"2\"\n    podmin.dev/max-surge: \"1\"\n")
	if _, err := PodStrategy(both); err == nil {
		t.Error("a payload with both maxSurge and maxUnavailable was accepted")
	}
	if _, err := PodStrategy([]byte("metadata:\n  annotations:\n    podmin.dev/max-surge: \"0\"\n")); err == nil {
		t.Error("a zero maxSurge annotation was accepted")
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
		if s, err := ParseMaxSurge(tc.v); err != nil || AllowedSurge(s, tc.nodes) != tc.want {
			t.Errorf("AllowedSurge(%s, %d) = %d (%v), want %d", tc.v, tc.nodes, AllowedSurge(s, tc.nodes), err, tc.want)
		}
		v, err := ParseMaxUnavailable(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := AllowedUnavailable(v, tc.nodes); got != tc.want {
			t.Errorf("AllowedUnavailable(%s, %d) = %d, want %d", tc.v, tc.nodes, got, tc.want)
		}
	}
}
