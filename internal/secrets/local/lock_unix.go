// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package local

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lock serialises writers of one cluster's secrets across processes, so a
// create-only write cannot replace a value created concurrently.
func (s *Store) lock(cluster string) (func(), error) {
	dir := filepath.Join(s.root, cluster)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("local: %w: fix the permissions of %s", err, s.root)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("local: lock secrets of %s: %w", cluster, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("local: lock secrets of %s: %w", cluster, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
