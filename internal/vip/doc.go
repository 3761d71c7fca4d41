// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package vip derives the deterministic IPv6 virtual address of a namespaced
// Service, so the DNS server, the eBPF dataplane and manifest tooling agree
// on it without exchanging it: fd50:6f64:6d69::/64 followed by the first 64
// bits of SHA-512 over "cluster\x00namespace\x00service".
//
// It owns only that formula; it must not validate names (callers pass names
// the manifest rules already accepted) or know where VIPs are served.
package vip
