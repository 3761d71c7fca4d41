// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package builtins is where the CLI (cmd/podmin) and the Starlark host
// (starlark/) find every Podmin operation: Env, the environment an
// operation runs in, has one method per operation, and the options and
// results keep their names here. Each operation is a plain Go function
// with a typed options struct and a typed result in the package of its
// family, so it behaves identically from a terminal and from a recipe:
//
//	contexts     connect, use, list, disconnect
//	secrets      secret create/update/read/delete/restore/destroy/list, CA secrets
//	manifests    init, validate
//	images       build, pull, push
//	deployments  deploy (with its checks), delete, list, status, wait, preview, index rebuild
//	install      install/uninstall cloudflared
//	lifecycle    setup, teardown, destroy (through the narrow lifecycle.Host)
//
// The families share openv (Env's fields and boundaries, the refusals and
// warnings every family reports); dryrun substitutes recording boundaries.
// This package wires them together and holds no operation's logic; no
// family imports it. It must not print, prompt or parse flags, and must
// not import cmd/ or starlark/. Progress goes through Env.Progress;
// results are returned.
package builtins
