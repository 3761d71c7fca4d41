// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFetchRejectsUnknownArchitectureAndLeavesBucketAlone(t *testing.T) {
	c := newCLI(t)
	c.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket")
	before := c.snapshot()
	// The architecture is checked before any request is made.
	c.fails(1, `unknown architecture "riscv64": use amd64 or arm64`, "fetch", "--arch", "riscv64")
	c.fails(2, "unknown output format", "fetch", "-o", "xml")
	c.unchanged(before)
	if _, err := os.Stat(filepath.Join(c.root, "cache", "podmin", "dependencies")); !os.IsNotExist(err) {
		t.Fatalf("a refused fetch created the cache: %v", err)
	}
}
