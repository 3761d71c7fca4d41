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
// It holds no operation. It must not import builtins or the families that
// build on it (contexts, secrets, manifests, images, deployments,
// install), starlark or cmd; of the lifecycle it knows only the names Env
// carries (Infra, ErrNotOwned). It must not print, prompt or parse flags.
package openv
