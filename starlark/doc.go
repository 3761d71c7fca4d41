// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package starlark is Podmin's Starlark host: the predeclared podmin module
// (thin wrappers over the builtins package, one small mod_*.go file per
// command group), podmin run (entry point, typed arguments, dry run, exit
// codes), load() resolution for shared recipes, podmin test and podmin repl.
//
// It owns argument unpacking, result conversion, the recorded plan of a dry
// run, the documentation registry that feeds help(), "podmin help
// starlark" and docs/starlark.md, the opaque secret value, the one
// confirmation guard of destructive builtins (Builtin.Destructive), the
// content pinning of shared recipes and the REPL's history file. It must not implement operations itself:
// every wrapper calls the same builtins function as the CLI, through the Ops
// interface. It must not print except through the writers it is given,
// which pass the scrubber (internal/scrub).
package starlark

//go:generate go run ./gendocs -o ../docs/starlark.md
