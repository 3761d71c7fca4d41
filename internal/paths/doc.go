// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package paths resolves Podmin's per-user state directories (config, cache,
// data, runtime) for the operating system and writes files atomically.
//
// It owns only locations and the atomic-write primitive; it must not know
// what is stored in them.
package paths
