// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package api serves and dials the coordination API (coordinationpb):
// protobuf gRPC on the node's global IPv6 address, port 8081, over TLS 1.3
// with mutual authentication under the cluster CA. Every call is
// authorized by the caller's SPIFFE URI SAN (its node ID), never its
// Common Name. A node's Hello registers its canonical global-unicast IPv6
// Pod /80, and the leader accepts that node's endpoints only inside it.
// The leader pushes change hints to the followers watching it.
//
// It decides nothing about leadership or snapshots: a Backend (the
// coordinator) does. Health endpoints stay on loopback, elsewhere.
package api
