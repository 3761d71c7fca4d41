// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package health owns the agent's loopback observation endpoints:
// /healthz, /readyz (Health: one reason per component that is not ready,
// detail lines with ?verbose) and /metrics (Metrics: each subsystem is one
// Source writing its families through a Writer, encoded by Prometheus'
// own text encoder), served by one Server beside further routes a
// subsystem registers. It reports; it decides nothing about the node.
package health
