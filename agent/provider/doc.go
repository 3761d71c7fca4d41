// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package provider opens what a node reads from its cloud provider (AWS)
// or, in local node mode, from the Podmin data directory: the cluster
// bucket read-side, the secrets providers whose values Pods mount, and
// the system secrets store holding the cluster CA and the workload CA
// key. It only opens them; it never writes desired state.
package provider
