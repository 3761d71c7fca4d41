// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package otellogs owns container log export shared by the CLI and the
// node: the --otel-logs option of setup (Parse, and Options.String for the
// canonical value nodes receive), the Fluent Bit configuration a node runs
// (Render), the
// exporter headers stored at /<cluster>/_system/otel-logs-headers
// (ParseHeaders) and the mode 0600 file the node writes before each
// Fluent Bit start (WriteConfig).
//
// It must not fetch anything: callers pass the header values, node names
// and file locations in, so header values never reach user-data,
// infrastructure variables or the dependency store through this package.
// Errors never quote a header value.
package otellogs
