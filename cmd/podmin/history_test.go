// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
)

// The built-ins list and roll back what the commands do, with the same
// parameters; a dry-run rollback plans the index write and writes nothing.
func TestHistoryAndRollbackBuiltins(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v2")
	recipe := c.script("rb.star", `def main(ctx):
    h = podmin.deployments.history("web", nodegroup = "workers")
    print([(r.revision, r.current, r.images) for r in h])
    r = podmin.deployments.rollback("web", nodegroup = "workers", to_revision = 1)
    print(r.action, r.from_revision, r.to_revision, r.planned)
    print([(r.revision, r.current) for r in podmin.deployments.history("web", nodegroup = "workers")])
`)
	out, errs, code := c.run("run", "--dry-run", recipe)
	if code != 0 || !strings.Contains(out, "updated 2 1 True") || !strings.Contains(out, "podmin.deployments.rollback(\"web\")") ||
		!strings.Contains(out, "[(3, True), (2, False), (1, False)]") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errs)
	}
	if out := c.ok("history", "web", "-g", "workers"); strings.Contains(out, "\n3 ") {
		t.Fatalf("the dry run wrote a revision:\n%s", out)
	}
	out = c.ok("run", recipe)
	want := []string{`[(2, True, ["registry.podmin.internal/apps/hello:v2"]), (1, False, ["registry.podmin.internal/apps/hello:v1"])]`,
		"updated 2 1 False", "[(3, True), (2, False), (1, False)]"}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("run lacks %q:\n%s", w, out)
		}
	}
	if out := c.ok("history", "web", "-g", "workers", "-o", "json"); !strings.Contains(out, `"revision": 3,
      "current": true`) || !strings.Contains(out, `apps/hello:v1"
      ],`) {
		t.Errorf("history after the rollback:\n%s", out)
	}
}
