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

// fetchExitRows are the exit-code rows of fetch; fresh has no context
// (fetch needs none), c is connected.
func fetchExitRows(t *testing.T, fresh, c *cli) []exitRow {
	return []exitRow{
		{fresh, exitUsage, `unknown output format "xml"`, []string{"fetch", "-o", "xml"}},
		{fresh, exitUsage, `unknown command "containerd" for "podmin fetch"`, []string{"fetch", "containerd"}},
		{fresh, exitUsage, "unknown flag: --archs", []string{"fetch", "--archs", "amd64"}},
		{c, exitFailed, `unknown architecture "riscv64": use amd64 or arm64`, []string{"fetch", "--arch", "riscv64"}},
	}
}
