// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package workload is the node side of workload identity. Every agent holds
// the workload CA key in memory, follows the public CA state in
// identity/ca.json (refusing any certificate not made from that key) and
// issues each Pod's 24-hour Ed25519 leaf locally into a generation
// beneath /run/podmin/workloads/<pod>/identity-generations, selected by
// an atomically switched relative "identity" symlink. The leaf's
// fingerprint is the Pod's podmin.dev/identity-revision: a new leaf
// restarts the Pod. tls.crt and tls.key of a generation never change;
// ca.crt is replaced in place (atomically) when the CA bundle changes,
// which restarts nothing. Leaves due for replacement are replaced at a
// deterministic point of a restart window per NodeGroup, node and Pod
// (RestartOffset), so no event restarts a fleet at once (restart.go).
//
// Only the elected leader writes identity/ca.json (compare-and-swap) and
// the optional external bundle copy; the rotation rule itself is
// pki.PlanRotation.
//
// It must not write desired state or static Pod files: the static-Pod
// reconciler asks it for a Pod's identity and annotates the Pod itself. No
// private key leaves the node. Open reads the workload CA key, or runs
// the node without identities while the cluster has none.
package workload
