// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package identity is the agent's coordination mTLS identity. Every node
// reads the shared cluster CA (/<cluster>/_system/cluster-ca) and
// self-issues a short-lived Ed25519 client/server leaf in memory, renewed
// before expiry, whose only IP SAN is the node's global IPv6 address and
// whose one SPIFFE URI binds cluster, NodeGroup and node ID. It provides
// TLS 1.3-only server and client configurations that require and verify
// that identity on both sides; authorization uses the URI, never the
// Common Name.
//
// It must not write the private key anywhere; the cluster CA key stays in
// process memory.
package identity
