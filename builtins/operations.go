// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import (
	"context"

	ctxops "podmin.dev/podmin/builtins/contexts"
	"podmin.dev/podmin/internal/contexts"
)

// Every operation of every family, as a method of Env and with its options
// and results under the names the CLI and the Starlark host use. Each
// family lives in its own package (builtins/<family>); this file only
// forwards to it.

// The contexts family (builtins/contexts).
type (
	ConnectOptions    = ctxops.ConnectOptions
	ConnectResult     = ctxops.ConnectResult
	ContextEntry      = ctxops.ContextEntry
	DisconnectOptions = ctxops.DisconnectOptions
	DisconnectResult  = ctxops.DisconnectResult
	UseOptions        = ctxops.UseOptions
)

// Constants of the family above.
const (
	ClusterTag = ctxops.ClusterTag
)

// Errors of the family above.
var (
	ErrForeignBucket = ctxops.ErrForeignBucket
	ErrWouldReplace  = ctxops.ErrWouldReplace
)

// Connect runs ctxops.Connect in e.
func (e *Env) Connect(ctx context.Context, opts ConnectOptions) (ConnectResult, error) {
	return ctxops.Connect(ctx, e.op(), opts)
}

// Disconnect runs ctxops.Disconnect in e.
func (e *Env) Disconnect(opts DisconnectOptions) (DisconnectResult, error) {
	return ctxops.Disconnect(e.op(), opts)
}

// ListContexts runs ctxops.ListContexts in e.
func (e *Env) ListContexts() ([]ContextEntry, error) { return ctxops.ListContexts(e.op()) }

// Use runs ctxops.Use in e.
func (e *Env) Use(opts UseOptions) (contexts.Context, error) { return ctxops.Use(e.op(), opts) }
