// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package objstoretest is the object-store contract written as tests: Run
// holds any objstore.Store to the behaviour the rest of Podmin relies on
// (conditional reads and writes, create-only and compare-and-swap races,
// listing order and paging), and RunBenchmarks measures the hot operations.
// Every backend (local, s3store, and later ones) runs the same suite.
//
// It is imported only by tests. It must not assert anything a correct
// backend may legitimately do differently (for example ETag format, or
// whether equal contents get equal ETags), and it must not depend on any
// backend package.
package objstoretest
