// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package clock holds the time helpers shared by the CLI, the agent and
// their test stores. It must not import any other Podmin package.
package clock
