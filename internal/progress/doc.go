// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package progress shows how far long transfers (push, pull, build) have
// come: live bars with bytes, rate and time left per blob and in total on
// a terminal (package bars, kept apart so that programs which never draw
// on a terminal do not link it), plain periodic lines elsewhere (CI logs),
// nothing when discarded. Operations report into a Sink; they never decide
// how it is shown, and nothing here writes to standard output.
package progress
