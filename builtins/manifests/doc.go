// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package manifests is the manifests family: init renders the built-in
// minimal DaemonSet (and Service) into a new file, validate runs deploy's
// extraction without writing, and BuildManifest and ReadFile give deploy
// the manifest it commits. The rules themselves live in internal/manifest.
//
// It reaches its surroundings only through openv.Env; it must not import
// builtins or another family, starlark or cmd, print, prompt or parse
// flags.
package manifests
