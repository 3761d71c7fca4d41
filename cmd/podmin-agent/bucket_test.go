// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
)

func localBucket(dir string) objstore.Store { return local.Open(dir) }
