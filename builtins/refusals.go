// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import "podmin.dev/podmin/builtins/lifecycle"

// ErrNotOwned reports an operation refused because Podmin cannot prove
// that the cluster owns what it would change or delete (an untagged
// bucket, a VPC it did not create). Like ErrNotConfirmed and
// ErrForeignBucket it is a refusal for safety: the CLI exits 4.
var ErrNotOwned = lifecycle.ErrNotOwned
