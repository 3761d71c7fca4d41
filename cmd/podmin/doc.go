// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Command podmin is the operator's CLI: it writes a cluster's desired state
// into its object-storage bucket. Every command is a thin layer over the
// builtins package, which the Starlark host uses too.
package main
