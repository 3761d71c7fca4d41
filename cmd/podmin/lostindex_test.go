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

// TestLostIndexCommands: with deployments/index.json deleted from a bucket
// that still holds the Pod payloads, deploy and delete (with or without
// --ignore-not-found, and in a recipe) refuse with exit 4 and write
// nothing; list and status say the index is missing (indexMissing in -o
// json) and exit 1; "podmin index rebuild" restores it. A new cluster
// still says "no deployments committed".
func TestLostIndexCommands(t *testing.T) {
	c := newCLI(t)
	bucket := c.connectLocal()
	if out := c.ok("list"); !strings.Contains(out, "no deployments committed") {
		t.Fatalf("list of a new cluster:\n%s", out)
	}
	if out := c.ok("status"); !strings.Contains(out, "no deployments committed") {
		t.Fatalf("status of a new cluster:\n%s", out)
	}
	for _, n := range []string{"web", "api", "db"} {
		c.ok("deploy", n, "-g", "workers", "--image", "hello:v1")
	}
	if err := os.Remove(filepath.Join(bucket, "deployments", "index.json")); err != nil {
		t.Fatal(err)
	}
	deployScript := c.script("deploy.star", "podmin.deployments.deploy(\"new\", nodegroup = \"workers\", image = \"hello:v1\")\n")
	deleteScript := c.script("delete.star", "podmin.deployments.delete(\"web\", nodegroup = \"workers\", ignore_not_found = True, confirm = True)\n")
	listScript := c.script("list.star", "print(podmin.deployments.list())\n")
	before := c.snapshot()
	const advice = `run "podmin index rebuild"`
	c.fails(exitRefused, advice, "deploy", "new", "-g", "workers", "--image", "hello:v1")
	c.fails(exitRefused, advice, "deploy", "web", "-g", "workers", "--image", "hello:v2", "--wait", "--timeout", "5s")
	c.fails(exitRefused, advice, "delete", "web", "-g", "workers", "-y")
	c.fails(exitRefused, advice, "delete", "web", "-g", "workers", "-y", "--ignore-not-found")
	c.fails(exitRefused, advice, "run", deployScript)
	c.fails(exitRefused, advice, "run", deleteScript)
	c.fails(exitRefused, advice, "run", "--dry-run", deployScript)
	c.fails(exitFailed, advice, "list")
	c.fails(exitFailed, advice, "status")
	c.fails(exitFailed, advice, "status", "web", "-g", "workers")
	c.fails(exitFailed, advice, "status", "web", "-g", "workers", "--wait", "--timeout", "5s")
	c.fails(exitFailed, advice, "preview", "-g", "workers")
	c.fails(exitFailed, advice, "run", listScript)
	c.fails(exitRefused, advice, "rollback", "web", "-g", "workers")
	c.fails(exitRefused, advice, "deploy", "new", "-g", "workers", "--image", "hello:v1", "--dry-run")
	c.fails(exitFailed, advice, "history", "web", "-g", "workers")
	c.unchanged(before)

	for _, args := range [][]string{{"list"}, {"status"}} {
		out, errs, code := c.run(append(args, "-o", "json")...)
		var doc struct {
			Bucket       string
			IndexMissing *bool
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitFailed || doc.IndexMissing == nil || !*doc.IndexMissing || doc.Bucket != bucket {
			t.Fatalf("%s -o json: exit %d, %v\n%s%s", args[0], code, err, out, errs)
		}
		out, _, _ = c.run(args...)
		if strings.Contains(out, "no deployments committed") || !strings.Contains(out, "deployments/index.json is missing") {
			t.Fatalf("%s over a lost index:\n%s", args[0], out)
		}
	}

	c.ok("index", "rebuild", "-y")
	out := c.ok("list")
	for _, n := range []string{"web", "api", "db"} {
		if !strings.Contains(out, "workers    "+n) {
			t.Fatalf("list after the rebuild lacks %s:\n%s", n, out)
		}
	}
	var st struct{ IndexMissing *bool }
	if err := json.Unmarshal([]byte(c.ok("status", "-o", "json")), &st); err != nil || st.IndexMissing == nil || *st.IndexMissing {
		t.Fatalf("status -o json after the rebuild: %+v, %v", st, err)
	}
	c.ok("deploy", "new", "-g", "workers", "--image", "hello:v1")
	c.fails(exitFailed, "the deployments index is valid", "index", "rebuild", "-y")
}
