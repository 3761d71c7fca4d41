// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package deployments is the deployments family: deploy (with the checks
// that a committed deployment can run: a served NodeGroup, images in the
// cluster registry, secrets in their provider), delete, list, status,
// wait, preview and the rebuild of a lost index. Every write goes through
// the index committer in internal/state.
//
// It reaches its surroundings only through openv.Env and takes manifests
// from the manifests family; it must not import builtins, starlark or cmd,
// print, prompt or parse flags.
package deployments
