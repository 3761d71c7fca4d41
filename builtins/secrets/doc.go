// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package secrets is the secrets family: create, update, read, delete,
// restore, destroy and list the secrets of a cluster's Pods and system keys
// in the secrets provider its context allows, and the create-only CA
// secrets setup stores (EnsureCASecrets). Values pass through the scrub
// registry so they never reach output.
//
// It reaches its surroundings only through openv.Env; it must not import
// builtins or another family, starlark or cmd, print, prompt or parse
// flags.
package secrets
