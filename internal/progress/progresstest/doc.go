// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package progresstest records what operations report to a progress.Sink,
// for tests that check every byte moved is reported and every transfer
// ends. It is never used outside tests.
package progresstest
