// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package openv

import (
	"errors"

	"podmin.dev/podmin/builtins/lifecycle"
)

// ErrNotConfirmed reports a destructive operation that was not confirmed:
// no --yes/-y, no confirm = in a script, and no terminal to ask on. The CLI
// exits with status 4 on it.
var ErrNotConfirmed = errors.New("destructive operation not confirmed")

// ErrNotOwned reports an operation refused because Podmin cannot prove
// that the cluster owns what it would change or delete (an untagged
// bucket, a VPC it did not create). Like ErrNotConfirmed and
// ErrForeignBucket it is a refusal for safety: the CLI exits 4.
var ErrNotOwned = lifecycle.ErrNotOwned
