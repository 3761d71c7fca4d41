// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import "errors"

// ErrNotConfirmed reports a destructive operation that was not confirmed:
// no --yes/-y, no confirm = in a script, and no terminal to ask on. The CLI
// exits with status 4 on it.
var ErrNotConfirmed = errors.New("destructive operation not confirmed")
