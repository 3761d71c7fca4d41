// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package builtins holds every Podmin operation as a plain Go function with a
// typed options struct and a typed result. The CLI (cmd/podmin) and the
// Starlark host (starlark/) are thin layers over these same functions, so an
// operation behaves identically from a terminal and from a recipe.
//
// It must not print, prompt or parse flags, and must not import cmd/ or
// starlark/. Progress goes through Env.Progress; results are returned.
package builtins
