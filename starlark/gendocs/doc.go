// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Command gendocs writes docs/starlark.md from the builtin registry of the
// starlark package (go generate ./starlark).
package main
