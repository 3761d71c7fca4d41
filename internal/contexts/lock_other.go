// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package contexts

// lockDir is a no-op where advisory file locks are unavailable; concurrent
// updates from several processes may then lose one another's change.
func lockDir(string) (func(), error) { return func() {}, nil }
