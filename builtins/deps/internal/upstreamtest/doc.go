// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package upstreamtest serves the upstream release APIs recorded in the
// deps package's testdata over httptest. It does not import deps, so the
// deps package's own tests and depstest share one server.
package upstreamtest
