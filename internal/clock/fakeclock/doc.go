// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package fakeclock is a clock for tests: time moves only when the test
// advances it, and a timer fires when the time it waits for is reached.
// Several agents can share one clock, each waiting under its own owner,
// so that a test can tell when every agent is blocked.
package fakeclock
