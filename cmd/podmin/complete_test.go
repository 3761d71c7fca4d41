// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
)

// completions runs podmin __complete and returns the offered values.
func (c *cli) completions(args ...string) []string {
	c.t.Helper()
	out, errs, code := c.run(append([]string{"__complete"}, args...)...)
	if code != 0 {
		c.t.Fatalf("__complete %v: exit %d\n%s%s", args, code, out, errs)
	}
	var vals []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" && !strings.HasPrefix(l, ":") {
			vals = append(vals, strings.SplitN(l, "\t", 2)[0])
		}
	}
	return vals
}

func TestCompletionWithoutContext(t *testing.T) {
	c := newCLI(t) // a fresh home: no contexts file at all
	if got := strings.Join(c.completions("de"), " "); got != "delete deploy destroy" {
		t.Errorf("commands: %q", got)
	}
	if got := strings.Join(c.completions("list", "-o", ""), " "); got != "table json yaml name jsonpath=" {
		t.Errorf("-o: %q", got)
	}
	if got := strings.Join(c.completions("secret", "list", "--output", "j"), " "); got != "json jsonpath=" {
		t.Errorf("secret list --output: %q", got)
	}
	if got := c.completions("use", ""); len(got) != 0 {
		t.Errorf("use without contexts: %q", got)
	}
	if got := c.completions("delete", "web", "-g", ""); len(got) != 0 {
		t.Errorf("-g without a context: %q", got)
	}
	if got := strings.Join(c.completions("connect", "x", "--provider", ""), " "); !strings.Contains(got, "local") {
		t.Errorf("--provider: %q", got)
	}
}

func TestCompletionFromTheBucket(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	c.ok("connect", "other", "--provider", "local", "--bucket", c.root+"/other-bucket")
	c.ok("use", "demo")
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	c.ok("deploy", "api", "-g", "edge", "--image", "hello:v1")
	if got := strings.Join(c.completions("use", ""), " "); got != "demo other" {
		t.Errorf("use: %q", got)
	}
	if got := strings.Join(c.completions("disconnect", "o"), " "); got != "other" {
		t.Errorf("disconnect: %q", got)
	}
	if got := strings.Join(c.completions("deploy", "x", "-g", ""), " "); got != "edge workers" {
		t.Errorf("-g: %q", got)
	}
	if got := strings.Join(c.completions("delete", "x", "--nodegroup", "w"), " "); got != "workers" {
		t.Errorf("--nodegroup w: %q", got)
	}
	if got := strings.Join(c.completions("delete", ""), " "); got != "--nodegroup -g api web" { // the required flag first
		t.Errorf("delete NAME: %q", got)
	}
	// --context names a saved context and switches the bucket completed from.
	if got := strings.Join(c.completions("list", "--context", "o"), " "); got != "other" {
		t.Errorf("--context o: %q", got)
	}
	if got := c.completions("deploy", "--context", "other", "x", "-g", ""); len(got) != 0 {
		t.Errorf("-g of cluster other, which has no deployments: %q", got)
	}
	if got := strings.Join(c.completions("deploy", "--context", "demo", "x", "-g", ""), " "); got != "edge workers" {
		t.Errorf("-g of cluster demo: %q", got)
	}
	c.env["PODMIN_CONTEXT"] = "other"
	if got := c.completions("delete", "x", "-g", ""); len(got) != 0 {
		t.Errorf("-g with PODMIN_CONTEXT=other, which has no deployments: %q", got)
	}
	delete(c.env, "PODMIN_CONTEXT")
}

// TestUsageErrorsPointAtTheSubcommand checks that a usage error names the
// help of the command that was called.
func TestUsageErrorsPointAtTheSubcommand(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	for args, want := range map[string]string{
		"secret destroy":     `run "podmin secret destroy --help"`,
		"delete web --bogus": `run "podmin delete --help"`,
		"list -o xml":        `run "podmin list --help"`,
		"run a.star b.star":  `run "podmin run --help"`,
		"recipes lock a b":   `run "podmin recipes lock --help"`,
		"nosuchcommand":      `run "podmin --help"`,
	} {
		c.fails(2, want, strings.Fields(args)...)
	}
}
