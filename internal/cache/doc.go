// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package cache is a content-addressed object cache on local disk, under the
// Podmin cache directory. An object is named by the SHA-512 of its bytes, so
// an entry can never be stale: it is verified when it is written and again
// when it is read, and a file whose bytes do not match its name is removed
// and reported as a miss.
//
// Several processes may share one cache directory. Every file appears by
// rename of a complete temporary file in the same directory, so a reader sees
// a whole object or none; eviction removes files, which a concurrent reader
// sees as a miss. The cache is bounded in bytes: when it grows past its
// bound, the least recently used files are removed until it is below three
// quarters of it. A process checks the size on its first write and after
// every tenth of the bound it has written, so the bound is exceeded by at
// most that tenth per writing process.
//
// An object may carry small notes, named values its callers attach to it
// (where its bytes were verified, for example). Notes are written the same
// atomic way and removed when their object is evicted.
//
// The cache must not know what the objects or notes mean or where they
// came from; callers decide which content addresses are worth caching.
package cache
