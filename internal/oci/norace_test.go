// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !race

package oci_test

// raceEnabled reports a build with the race detector, whose shadow memory
// inflates a process's resident set.
const raceEnabled = false
