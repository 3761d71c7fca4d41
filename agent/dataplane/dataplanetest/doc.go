// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package dataplanetest holds a recording stand-in for the kernel
// dataplane, for tests of what feeds it (the coordinator's node wiring and
// the whole agent) on machines without eBPF. It is used only by tests.
package dataplanetest
