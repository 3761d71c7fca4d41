// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package bpf holds Podmin's eBPF programs: the C sources in c/, the
// compiled object committed beside them and the bpf2go-generated Go that
// embeds it, so that building and testing Podmin needs no clang.
//
// vip.c is the Service VIP dataplane (TCX ingress; DNAT to a ready
// backend, SNAT to the node, reverse NAT of replies). Its maps are the
// contract with agent/dataplane, which fills them; this package only
// describes them and must not attach anything.
//
// "make generate" (go generate) rebuilds the object and bindings with
// generate.sh; a test regenerates them with clang and fails when the
// committed files differ.
package bpf

//go:generate ./generate.sh
