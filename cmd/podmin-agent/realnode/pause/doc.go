// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Command pause is the Pod sandbox's placeholder process of the real-node
// end-to-end test, which cannot reach registry.k8s.io for the pause image
// a node normally runs: it sleeps until SIGTERM or SIGINT and exits 0.
package main
