// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package coordinator is the cluster-wide coordination of Service
// endpoints: one agent, elected on the bucket (package election), collects
// every node's ready endpoints, builds deterministic Service snapshots and
// persists them to dns/services.pb with generation/revision writes that
// fence a superseded leader. Followers keep their last snapshot for the
// lease window during a partition, then clear leased backends while
// keeping Service DNS identities.
//
// A node's endpoints come from its own reconciler (the Coordinator is the
// static-Pod reconciler's Publisher of Services) and the kubelet Pods API
// watcher (PodsChanged): ready Pods matching each Service, at addresses
// inside the node's Pod /80. The Coordinator hands the resulting view to
// DNS and the dataplane (OnView) and the leader's index hints to the
// reconcile loop (OnIndexHint).
//
// It never writes desired state (deployments/index.json and payloads) and
// does not serve DNS or program the dataplane: it hands snapshots to them.
package coordinator
