// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package agent is podmin-agent's composition root: it validates the node's
// configuration, opens the cluster bucket and secrets providers, and runs
// each subsystem as a Component with a start/stop lifecycle: the loopback
// health endpoints, the static-Pod reconciler (staticpod), and on real nodes
// the kubelet Pods API watcher (pods). On SIGTERM it stops reconciliation
// first, waits the DNS TTL margin while still serving, then stops the rest;
// milestone-2 subsystems (registry, coordinator, DNS, dataplane) join as
// further components.
//
// It reads the cluster bucket and never writes desired state; it must not
// import builtins, starlark or cmd.
package agent
