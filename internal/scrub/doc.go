// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package scrub is Podmin's one output scrubber: a registry of the secret
// values the process has seen, and writers and error wrappers that replace
// every registered value — and its common encodings (JSON and Go quoting,
// standard and URL base64 at every byte alignment, hex, URL escaping) —
// with "<secret KEY>" before a byte leaves the process.
//
// The command-line program uses the process's registry (Process) for
// everything that prints: stdout, stderr, error messages, Starlark print()
// and backtraces, dry-run plans, test reports, the REPL and its history.
// Values are registered the moment they enter the process (a file,
// standard input, the terminal, a Starlark literal given to podmin.secret
// or value =, a value read from a secrets provider). Tests that need
// isolation create their own Registry with New.
//
// Values shorter than MinLen bytes are not scrubbed: replacing every
// occurrence of a two-letter string would make output unreadable without
// protecting anything. They stay opaque in Starlark all the same.
//
// The package must not print, log or keep values anywhere but in memory.
package scrub
