// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package openv is the environment every operation family runs in: Env
// (the per-user directories, the providers, the secrets factory, the
// clock, the progress sinks), its boundaries (the contexts file, local
// files, registries; a dry run and a recipe test substitute recording or
// sandboxed ones), the cluster bucket with its deadline annotations and
// payload cache, and what all families report alike (ErrInvalidArgument,
// ErrNotConfirmed, ErrNotOwned, ErrTimeout, Warning).
//
// It holds no operation. It must not import builtins or any operation
// family (they import it), starlark or cmd, and must not print, prompt or
// parse flags.
package openv
