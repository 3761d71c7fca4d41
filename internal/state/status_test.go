// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"bytes"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/internal/state"
)

func TestNodeGroupStatusPath(t *testing.T) {
	got, err := state.NodeGroupStatusPath("workers")
	if err != nil || got != "status/nodegroups/workers.json" {
		t.Fatalf("NodeGroupStatusPath(workers) = %q, %v", got, err)
	}
	if _, err := state.NodeGroupStatusPath("Bad_Group"); err == nil {
		t.Fatal("an invalid NodeGroup ID made a path")
	}
	if !strings.HasPrefix(got, state.NodeGroupStatusPrefix) {
		t.Fatalf("%q is not under %q", got, state.NodeGroupStatusPrefix)
	}
}

func TestNodeGroupStatusRoundTrip(t *testing.T) {
	three := 3
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	s := &state.NodeGroupStatus{
		NodeGroup: "workers", Leader: "node-0", Term: 7, UpdatedAt: at, Settled: true, Expected: &three, Live: 2, Missing: 1,
		Nodes: []state.NodeStatus{
			{Node: "node-0", Address: "2001:db8::1", State: state.NodeLive, Kubelet: true, Deployments: []state.DeploymentReport{{
				Name: "web", Revision: "r1", AppliedAt: &at, Desired: "r1", Readiness: state.Ready, ReportedAt: at,
			}}},
			{Node: "node-2", State: state.NodeMissing},
		},
		Rollouts: []state.RolloutStatus{{Name: "web", Revision: "r2", MaxUnavailable: "1", Allowed: 1, Updating: []string{"node-0"}}},
	}
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Encode()
	if err != nil || !bytes.Equal(data, again) {
		t.Fatal("equal statuses encode to different bytes")
	}
	for _, field := range []string{`"version": 1`, `"stuck": []`, `"deployments": []`, `"error": null`, `"expected": 3`} {
		if !bytes.Contains(data, []byte(field)) {
			t.Errorf("encoding lacks %s:\n%s", field, data)
		}
	}
	back, err := state.DecodeNodeGroupStatus(data)
	if err != nil {
		t.Fatal(err)
	}
	if back.Nodes[0].Deployments[0].Readiness != state.Ready || *back.Expected != 3 || back.Rollouts[0].Updating[0] != "node-0" {
		t.Fatalf("decoded %+v", back)
	}
}

func TestDecodeNodeGroupStatusIsStrict(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field":  `{"version":1,"nodegroup":"workers","surprise":1}`,
		"other version":  `{"version":2,"nodegroup":"workers"}`,
		"trailing data":  `{"version":1,"nodegroup":"workers"} {}`,
		"bad nodegroup":  `{"version":1,"nodegroup":"Bad_Group"}`,
		"not an object":  `[]`,
		"wrong type":     `{"version":1,"nodegroup":"workers","live":"two"}`,
		"truncated JSON": `{"version":1,"nodegroup":"work`,
	} {
		if _, err := state.DecodeNodeGroupStatus([]byte(doc)); !errors.Is(err, state.ErrInvalidStatus) {
			t.Errorf("%s: err = %v, want ErrInvalidStatus", name, err)
		}
	}
	big := bytes.Repeat([]byte(" "), state.MaxStatusBytes+1)
	if _, err := state.DecodeNodeGroupStatus(big); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("oversized object: %v", err)
	}
}

func TestNodeGroupSizes(t *testing.T) {
	for name, tc := range map[string]struct {
		doc  string
		want map[string]int
	}{
		"local list": {`{"cluster":"demo","nodegroups":[{"name":"workers","size":3},{"name":"canary","size":1}]}`,
			map[string]int{"workers": 3, "canary": 1}},
		"aws map":   {`{"cluster":"demo","nodegroups":{"workers":{"size":3,"disk_size":20},"edge":{"size":0}}}`, map[string]int{"workers": 3, "edge": 0}},
		"no groups": {`{"cluster":"demo"}`, map[string]int{}},
		"no size":   {`{"nodegroups":[{"name":"workers"}]}`, map[string]int{}},
	} {
		got, err := state.NodeGroupSizes([]byte(tc.doc))
		if err != nil || !maps.Equal(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v", name, got, err, tc.want)
		}
	}
	if _, err := state.NodeGroupSizes([]byte(`{"nodegroups":"three"}`)); err == nil {
		t.Error("a string nodegroups value was accepted")
	}
	if _, err := state.NodeGroupSizes([]byte(`{`)); err == nil {
		t.Error("invalid JSON was accepted")
	}
}

func TestLeaseLive(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l := state.Lease{LeaderID: "node-0", LastUpdated: now.Add(-state.LeaseLive)}
	if !l.Live(now) {
		t.Error("a lease renewed LeaseLive ago is not live")
	}
	if l.Live(now.Add(time.Second)) {
		t.Error("a lease past LeaseLive is live")
	}
	if (state.Lease{LastUpdated: now}).Live(now) {
		t.Error("a vacant lease is live")
	}
}
