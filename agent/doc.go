// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package agent is podmin-agent's composition root: it validates the node's
// configuration, opens the cluster bucket and secrets providers, and runs
// each subsystem as a Component with a start/stop lifecycle: the loopback
// health endpoints (/healthz, /readyz with one reason per problem, /metrics
// with the reconciler's counters), the read-only registry, the static-Pod
// reconciler (staticpod) with, for a local bucket, an IndexWatcher that
// turns commits into immediate passes, and on real nodes the kubelet Pods
// API watcher (pods). On SIGTERM it stops reconciliation first, waits the
// DNS TTL margin while still serving, then stops the rest; milestone-2
// subsystems (coordinator, DNS, dataplane) join as further components.
// Options.Once instead runs a single pass and returns its outcome.
//
// It reads the cluster bucket and never writes desired state; it must not
// import builtins, starlark or cmd.
package agent
