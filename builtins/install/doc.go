// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package install is the install family: the components Podmin installs
// for the operator (cloudflared today) as deployments it pins by digest,
// mirrors from their upstream registry into the cluster registry, and
// refuses to uninstall unless Podmin installed them.
//
// It reaches its surroundings only through openv.Env and commits through
// the deployments family; it must not import builtins, starlark or cmd,
// print, prompt or parse flags.
package install
