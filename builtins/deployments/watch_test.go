// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deployments

import "testing"

// A watch ends only on what a wait for readiness would accept: a node's
// error or a NodeGroup whose status is not current keeps it going.
func TestAllReady(t *testing.T) {
	ready := DeploymentStatus{Name: "web", NodeGroup: "workers", Revision: "r1", State: StateReady, Applied: 2, Ready: 2, Total: 2,
		Nodes: []NodeDeployment{{Node: "n1", Revision: "r1", Readiness: "ready"}, {Node: "n2", Revision: "r1", Readiness: "ready"}}}
	group := func(d ...DeploymentStatus) StatusResult {
		return StatusResult{NodeGroups: []NodeGroupStatus{{NodeGroup: "workers", Deployments: d}}}
	}
	if !AllReady(StatusResult{}) {
		t.Error("nothing shown is not all ready")
	}
	if !AllReady(group(ready)) {
		t.Error("a ready deployment is not ready")
	}
	failing := ready
	failing.State = StateFailed
	failing.Errors = []NodeError{{Node: "n2", Kind: "kubelet", Message: "CrashLoopBackOff", Revision: "r1"}}
	if AllReady(group(ready, failing)) {
		t.Error("a deployment with a node's error counts as ready")
	}
	stale := group(ready)
	stale.NodeGroups[0].Problem = "no leader holds a live lease"
	if AllReady(stale) {
		t.Error("a NodeGroup whose status is not current counts as ready")
	}
	progressing := ready
	progressing.State, progressing.Ready = StateProgressing, 1
	if AllReady(group(progressing)) {
		t.Error("a progressing deployment counts as ready")
	}
}
