// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package statetest commits deployments straight to a bucket, as podmin
// deploy does, for tests of what reads the desired state (the agent, its
// coordinator). It is used only by tests.
package statetest
