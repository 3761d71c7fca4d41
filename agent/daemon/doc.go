// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package daemon owns the agent's start/stop lifecycle: a Component is one
// subsystem that starts and stops; a Daemon starts the serving components
// (health, registry, Service DNS, the dataplane, the coordinator) before
// the reconcilers and, on SIGTERM, stops the reconcilers first, drains,
// waits the DNS TTL margin while still serving, then stops the rest in
// reverse order. It knows no subsystem: the composition root lists them.
package daemon
