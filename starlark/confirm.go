// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"errors"
	"fmt"
)

// ErrNotConfirmed reports a destructive operation without confirmation.
var ErrNotConfirmed = errors.New("destructive operation not confirmed")

// confirmParam is the parameter every destructive builtin takes.
var confirmParam = Param{Name: "confirm", Type: "str", Doc: "the current cluster's ID, to confirm this destructive operation (or run with --yes)"}

// confirm allows a destructive operation when confirmArg names the current
// cluster or the run was started with --yes. A script never prompts.
func (c *call) confirm(confirmArg, what string) error {
	if c.host.opts.Yes {
		return nil
	}
	cur, err := c.host.ops.CurrentContext()
	if err != nil {
		return c.fail(err)
	}
	if confirmArg == "" {
		return c.fail(fmt.Errorf("%w: %s; pass confirm=%q (the current cluster) or run with --yes", ErrNotConfirmed, what, cur.Cluster))
	}
	if confirmArg != cur.Cluster {
		return c.fail(fmt.Errorf("%w: confirm=%q does not match the current cluster %q: %s only with confirm=%q", ErrNotConfirmed, confirmArg, cur.Cluster, what, cur.Cluster))
	}
	return nil
}
