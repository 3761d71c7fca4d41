// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package dryrun assembles an openv.Env (the environment every operation
// family runs in) whose boundaries record instead of write: the cluster
// buckets (a copy-on-write overlay per bucket), the secrets stores, the
// contexts file, local files and the local image store. The operations run
// unchanged over it, so a dry run is the real code; this package only
// records what they wrote and reports it as net changes between two marks.
//
// It must not implement any operation's semantics, and must never write
// to a real boundary.
package dryrun
