// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package version holds the build metadata that the Makefile injects with
// -ldflags -X. It must not depend on anything else in Podmin.
package version
