// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With a warm cache, a payload deleted from the bucket is reported by
// list -o json (a non-empty error, exit 1), and an identical deploy
// repairs it instead of reporting unchanged.
func TestListReportsDeletedPayloadWithWarmCache(t *testing.T) {
	c := newCLI(t)
	bucket := c.connectLocal()
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	type row struct {
		Name  string `json:"name"`
		Pod   string `json:"pod"`
		Error string `json:"error"`
	}
	var rows []row
	if err := json.Unmarshal([]byte(c.ok("list", "-o", "json")), &rows); err != nil || len(rows) != 1 || rows[0].Error != "" {
		t.Fatalf("list: %+v, %v", rows, err)
	}
	if err := os.Remove(filepath.Join(bucket, filepath.FromSlash(rows[0].Pod))); err != nil {
		t.Fatal(err)
	}
	out, errs, code := c.run("list", "-o", "json")
	rows = nil
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("list -o json: %q, %v", out, err)
	}
	if code != exitFailed || !strings.Contains(rows[0].Error, "is not in the bucket") || !strings.Contains(errs, "deploy them again") {
		t.Errorf("list after the payload was deleted: exit %d, row %+v\n%s", code, rows[0], errs)
	}
	if out := c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1"); !strings.Contains(out, "workers/web repaired") {
		t.Errorf("identical deploy after the payload was deleted:\n%s", out)
	}
	c.ok("list", "-o", "json")
}
