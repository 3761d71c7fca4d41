// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package agent is podmin-agent's composition root: it validates the node's
// configuration and will own the lifecycle of the reconciler, registry,
// identity, coordinator, DNS and dataplane components as they are added.
//
// It reads the cluster bucket and never writes desired state; it must not
// import builtins, starlark or cmd.
package agent
