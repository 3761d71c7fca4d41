// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package bpf holds Podmin's eBPF programs: the C sources in c/ and the
// committed bpf2go-generated Go bindings. The compiled object is build
// output: generate.sh compiles it with clang into obj/, which object.go
// embeds; a build without it loads nothing and says so (ErrNotBuilt).
//
// vip.c is the Service VIP dataplane (TCX ingress; DNAT to a ready
// backend, SNAT to the node, reverse NAT of replies, translation of
// ICMPv6 errors about NATed packets). Its maps are the contract with
// agent/dataplane, which fills them; this package loads the program with
// its maps sized to Limits (Load), names what a load creates
// (Generation), pins it and opens pins again only when they are provably
// that generation's (Pin, LoadPinned), probes the kernel for BPF_F_IPV6
// (CsumIPv6Supported), accounts the maps' kernel memory (Memory,
// LockedMemory) and must not attach anything.
//
// "make generate" (go generate) rebuilds the object and bindings with
// generate.sh, and make build/test run it when clang is installed; a test
// regenerates the bindings with clang and fails when the committed file
// differs.
package bpf

//go:generate ./generate.sh
