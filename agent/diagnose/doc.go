// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package diagnose says why kubelet reports a Pod not ready when kubelet's
// Pods API gives no reason. Kubelet records a failing readiness probe only
// as an event, which a node without an API server never sees; so for each
// container kubelet reports running but not ready, the node runs the
// container's readiness probe once itself, from the node as kubelet does
// (HTTP and HTTPS without certificate checks, TCP, gRPC health), and
// reports which probe, which address and port, and what it answered. It
// also watches the free space of the filesystems the container runtime and
// kubelet write to, since a full disk stops Pods from starting without a
// word in their status.
//
// A finding is what the node observed, with the time it was made; a probe
// that answers when the node tries it is reported as such, never guessed
// at. Exec probes run inside the container and are named, not run.
//
// It must not change Pods, kubelet's state or the node's files, and it
// probes only containers kubelet reports not ready, at a bounded pace.
package diagnose
