// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package recipes holds Podmin's shared Starlark recipes (*.star) and their
// tests (*_test.star). They are product: operators run and load() them. The
// Go code here only runs the recipe tests under go test.
package recipes
