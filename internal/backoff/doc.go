// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package backoff owns the one retry schedule Podmin's loops share: a
// capped, doubling delay, optionally jittered into [d/2, d). It only
// computes delays; each loop keeps its own clock (a timer, an injected
// Sleep or After), so tests drive the waits with a fake clock. It must not
// import any other Podmin package.
package backoff
