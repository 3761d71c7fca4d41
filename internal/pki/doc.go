// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package pki owns Podmin's certificate mechanics: the Ed25519 workload CA
// key and cluster CA secret formats, self-signed CA certificates, leaf
// issuance for workloads and nodes, PEM and PKCS#8 encoding, the checks
// that a certificate was made from a given key with the lifetimes, names
// and usages the specification requires, and the pure rotation math of the
// public workload CA state (identity/ca.json).
//
// It performs no I/O beyond reading randomness: callers inject the clock
// (as a time passed in) and the random source, fetch and store the bytes.
// Private keys leave it only as the values callers asked for; they never
// appear in errors.
package pki
