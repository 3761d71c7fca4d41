// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dryrun

import podminstate "podmin.dev/podmin/internal/state"

// readOnlyCache is the real payload cache as a dry run uses it: verified
// hits serve the dry run's reads as they serve a real run's, and what the
// dry run would store is dropped, since its payloads exist only in the
// overlay. Storing them cost a temporary file per payload in the scratch
// directory, removed again at the end.
type readOnlyCache struct {
	real podminstate.PayloadCache
}

func (c readOnlyCache) Get(digest string) ([]byte, bool) { return c.real.Get(digest) }
func (readOnlyCache) Put(string, []byte) error           { return nil }
