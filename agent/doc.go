// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package agent is podmin-agent's composition root: it validates the node's
// configuration, opens the cluster bucket and secrets providers, and runs
// each subsystem as a Component with a start/stop lifecycle: the loopback
// health endpoints (/healthz, /readyz with one reason per problem, /metrics
// with one source of families per subsystem), the read-only registry, the static-Pod
// reconciler (staticpod) with, for a local bucket, an IndexWatcher that
// turns commits into immediate passes and a CRIRuntime that pre-pulls new
// images through containerd before their Pods' files change and tells when a
// replaced Pod stopped, and on real
// nodes the kubelet Pods API watcher (pods). When the cluster CA exists it also runs coordination
// (coordination.go): the node identity, the coordinator (election, mTLS
// API, Service snapshots) as the reconciler's Service publisher and the Pods
// watcher's refresh, Service DNS restored from the durable snapshot before
// it serves, and the dataplane where it is enabled, both fed from the
// coordinator's view; the election decides the workload CA's leader.
// Startup serves DNS and discovers the leader before reconciling. On SIGTERM
// it stops reconciliation first, drains the node out of the leader's
// snapshot and waits the rest of the DNS TTL margin while still serving,
// then resigns the lease, releases the dataplane (a pinned one with
// Services stays attached, under its lease, for the next agent) and stops
// DNS.
// Nothing of coordination can stop Pod publication: a missing cluster CA
// is a warning, a part that cannot start is a /readyz reason.
// Options.Once instead runs a single pass and returns its outcome.
//
// It reads the cluster bucket and never writes desired state; it must not
// import builtins, starlark or cmd.
package agent
