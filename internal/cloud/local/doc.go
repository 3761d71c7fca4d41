// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package local is the embedded provider: a cluster bucket is a directory on
// this machine, so the whole control path runs without an account or a
// network. It must not be used for anything a real provider would not allow.
package local
