// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !unix

package local

import (
	"fmt"
	"os"
	"path/filepath"
)

// lock only creates the cluster directory where advisory file locks are
// unavailable; concurrent processes may then race a create against a create.
func (s *Store) lock(cluster string) (func(), error) {
	if err := os.MkdirAll(filepath.Join(s.root, cluster), 0o700); err != nil {
		return nil, fmt.Errorf("local: %w: fix the permissions of %s", err, s.root)
	}
	return func() {}, nil
}
