// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package agent is podmin-agent's composition root: it validates the
// node's configuration (Config, the six flags) and settings (Options, the
// environment) and lists the components an agent runs, in run.go, in the
// order they start; it holds no subsystem's logic. The provider's bucket
// and secret stores are opened (provider); then the serving components
// start: the loopback health, readiness and metrics server (health), and,
// when the cluster CA exists, the node's coordination (coordinator.Node:
// Service DNS restored from the durable snapshot, the dataplane, the
// coordinator, the leader's discovery), then the read-only registry
// (registry). The reconcilers start after them: the static-Pod loop
// (staticpod, with the CRI client of cri and the local bucket's
// IndexWatcher), workload identities (workload), container log export
// (telemetry), and on nodes with a kubelet the Pods API watcher (pods)
// and the diagnoser (diagnose). On SIGTERM the daemon (daemon) stops the
// reconcilers, drains the node out of the leader's snapshot, waits the
// rest of the DNS TTL margin while serving, then stops the serving
// components in reverse order. Nothing of coordination can stop Pod
// publication: a missing cluster CA is a warning, a part that cannot start
// is a /readyz reason. Options.Once instead runs a single pass and
// returns its outcome.
//
// It reads the cluster bucket and never writes desired state; no package
// beneath it imports it, and it must not import builtins, starlark or
// cmd.
package agent
