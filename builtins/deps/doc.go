// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package deps owns the node dependencies: their definitions as values
// (dependencies.go), the resolver that asks upstream release APIs for the
// greatest release of each pinned major, the verified local download cache,
// and publication into the cluster bucket under dependencies/ with
// manifest.json committed last by compare-and-swap, followed by retention.
//
// It must not import builtins, starlark or cmd: setup and fetch in builtins
// call it, and the CLI and Starlark reach it only through them or through
// the thin Fetch and Publish entry points.
package deps
