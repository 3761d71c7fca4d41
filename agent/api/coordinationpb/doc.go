// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package coordinationpb is the generated protobuf and gRPC code of the
// coordination API (coordination.proto). Edit the .proto file and run
// make generate; never edit the generated files.
package coordinationpb

//go:generate ../../../scripts/genproto.sh coordination.proto
