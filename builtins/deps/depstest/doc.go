// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package depstest serves the upstream release APIs recorded in the deps
// package's testdata over httptest, for tests outside that package that
// run the real dependency step (setup, its dry run).
package depstest
