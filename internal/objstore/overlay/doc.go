// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package overlay is a copy-on-write, recording objstore.Store: reads fall
// through to a real store, writes and deletes land in an in-memory layer
// that later reads see, and every successful write is recorded. A dry run
// hands it to the real operations in place of the cluster bucket, so the
// operations cannot tell and the real bucket is never modified.
//
// Conditional writes (create-only, If-Match, conditional delete) are judged
// against the merged view, so an operation fails in the overlay exactly
// where it would fail against the real bucket in the same state.
//
// It must not write to the store it wraps, ever.
package overlay
