// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package faultstore wraps an objstore.Store to count requests and to inject
// faults: errors before a call (the call is not made), latency, and
// ambiguous writes (the call is made, then its response is "lost"). Faults
// are chosen by rules on operation and key prefix, optionally with a
// probability drawn from a seeded RNG, so a failing run can be replayed.
// Streamed calls count as the request they are: Open as a Get, Write as a
// Put, PutIfAbsent or PutIfMatch according to its condition.
//
// It exists for tests: exactly-once logic (index commits, manifest commits,
// pushes) is proven against it, and request budgets are checked with its
// counters. It must never be used as a provider, and it must not change the
// semantics of a call it lets through.
package faultstore
