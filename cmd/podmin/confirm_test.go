// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	pstar "podmin.dev/podmin/starlark"
)

// checkGuardParity reports every destructive builtin whose command lacks
// the guard (annotation and --yes/-y), and every guarded command whose
// builtin is not Destructive.
func checkGuardParity(root *cobra.Command, reg []*pstar.Builtin) []string {
	var problems []string
	commands := map[string]*cobra.Command{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			commands[strings.TrimPrefix(sub.CommandPath(), root.Name()+" ")] = sub
			walk(sub)
		}
	}
	walk(root)
	builtinOf := map[string]*pstar.Builtin{}
	for _, b := range reg {
		if b.Command == "" {
			continue
		}
		builtinOf[b.Command] = b
		cmd := commands[b.Command]
		if cmd == nil {
			continue // the parity test reports it
		}
		guarded := cmd.Annotations[destructiveAnnotation] == "true"
		yes := cmd.Flags().Lookup("yes")
		switch {
		case b.Destructive && !guarded:
			problems = append(problems, fmt.Sprintf("%s is destructive but %q is not marked destructive", b.FullName(), "podmin "+b.Command))
		case b.Destructive && (yes == nil || yes.Shorthand != "y"):
			problems = append(problems, fmt.Sprintf("%q has no --yes/-y", "podmin "+b.Command))
		}
	}
	for path, cmd := range commands {
		if cmd.Annotations[destructiveAnnotation] != "true" {
			continue
		}
		if b := builtinOf[path]; b == nil || !b.Destructive {
			problems = append(problems, fmt.Sprintf("%q is destructive but its builtin is not", "podmin "+path))
		}
	}
	sort.Strings(problems)
	return problems
}

func TestGuardParity(t *testing.T) {
	if p := checkGuardParity(newRoot(&builtins.Env{}), pstar.Builtins()); len(p) > 0 {
		t.Fatalf("destructive guard differs:\n%s", strings.Join(p, "\n"))
	}
	// It notices a command that lost its guard.
	root := newRoot(&builtins.Env{})
	for _, c := range root.Commands() {
		if c.Name() == "delete" {
			delete(c.Annotations, destructiveAnnotation)
		}
	}
	if p := checkGuardParity(root, pstar.Builtins()); len(p) != 1 || !strings.Contains(p[0], `podmin.deployments.delete is destructive but "podmin delete" is not marked destructive`) {
		t.Errorf("a dropped guard went unnoticed: %q", p)
	}
}

// TestDestructiveCommandsNeedConfirmation runs each destructive command
// without a terminal: it exits 4, says how to confirm and changes nothing;
// with -y it does its work.
func TestDestructiveCommandsNeedConfirmation(t *testing.T) {
	c := destructibleCLI(t)
	cases := []struct {
		args []string
		flag string
	}{
		{[]string{"delete", "web", "-g", "workers"}, "-y"},
		{[]string{"secret", "destroy", "k", "--for", "web"}, "--yes"},
		{[]string{"disconnect", "demo"}, "-y"},
	}
	for _, tc := range cases {
		before := c.snapshot()
		c.fails(4, "pass --yes (-y) to podmin "+tc.args[0], tc.args...)
		c.unchanged(before)
		c.ok(append(tc.args, tc.flag)...)
	}
	// secret delete: the local provider has no delete, but the guard runs
	// first, before the provider says so.
	c.ok("connect", "demo", "--provider", "local", "--bucket", c.root+"/bucket2")
	c.fails(4, "pass --yes (-y) to podmin secret delete", "secret", "delete", "k", "--for", "web")
	c.fails(1, "local has no delete/restore", "secret", "delete", "k", "--for", "web", "-y")
}

// TestScriptConfirmation runs a script that deletes a deployment: without
// confirmation it exits 4 with the way to confirm; podmin run -y and
// confirm = True both work.
func TestScriptConfirmation(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	c.ok("deploy", "api", "-g", "workers", "--image", "hello:v1")
	bare := c.script("bare.star", "podmin.deployments.delete(\"web\", nodegroup = \"workers\")\n")
	c.fails(4, `pass confirm = "demo" (the cluster) or confirm = True, or run the script with podmin run --yes (-y)`, "run", bare)
	c.ok("run", "-y", bare)
	confirmed := c.script("confirmed.star", "podmin.deployments.delete(\"api\", nodegroup = \"workers\", confirm = \"demo\")\n")
	c.ok("run", confirmed)
	if out := c.ok("list"); strings.Contains(out, "web") || strings.Contains(out, "api") {
		t.Errorf("deployments left after confirmed deletes:\n%s", out)
	}
}

// TestNamedClusterIsACheck runs scripts whose confirm = names another
// cluster than the current context's: every flag combination refuses with
// exit 4 before anything changes, -y included, for each destructive
// built-in, and a dry run refuses as the real run would.
func TestNamedClusterIsACheck(t *testing.T) {
	c := destructibleCLI(t)
	c.ok("setup", "--nodegroup", "workers", "-y")
	calls := []string{
		`podmin.deployments.delete("web", nodegroup = "workers", confirm = "prod")`,
		`podmin.secrets.destroy("k", for_ = "web", confirm = "prod")`,
		`podmin.contexts.disconnect("demo", confirm = "prod")`,
		`podmin.cluster.teardown(confirm = "prod")`,
		`podmin.cluster.destroy(confirm = "prod")`,
		`podmin.uninstall.cloudflared(nodegroup = "workers", confirm = "prod")`,
	}
	for _, call := range calls {
		script := c.script("named.star", "def main(ctx):\n    "+call+"\n")
		for _, flags := range [][]string{nil, {"-y"}, {"--yes"}, {"--dry-run"}, {"--dry-run", "-y"}, {"--dry-run", "-y", "-o", "json"}} {
			before := c.snapshot()
			args := append(append([]string{"run"}, flags...), script)
			c.fails(exitRefused, `confirm = "prod" does not match the cluster "demo"`, args...)
			c.unchanged(before)
		}
	}
	// The same calls naming the current cluster pass without -y.
	c.ok("run", c.script("right.star", `podmin.deployments.delete("web", nodegroup = "workers", confirm = "demo")`+"\n"))
	if out := c.ok("list"); strings.Contains(out, "web") {
		t.Errorf("confirm = \"demo\" did not delete:\n%s", out)
	}
}

// TestDryRunOfADestructiveRecipe: a dry run needs no confirmation, changes
// nothing and shows every destructive step it plans, marked as needing
// confirmation when the script gave none.
func TestDryRunOfADestructiveRecipe(t *testing.T) {
	c := destructibleCLI(t)
	c.ok("deploy", "api", "-g", "workers", "--image", "hello:v1")
	script := c.script("cleanup.star", `def main(ctx):
    podmin.deployments.delete("web", nodegroup = "workers")
    podmin.deployments.delete("api", nodegroup = "workers", confirm = True)
    podmin.secrets.destroy("k", for_ = "web")
`)
	before := c.snapshot()
	out := c.ok("run", "--dry-run", script)
	c.unchanged(before)
	for _, want := range []string{
		"3 destructive call(s); nothing was written",
		"podmin.deployments.delete(\"web\")  at " + script + ":2:30  [destructive]\n  not confirmed by the script",
		"- workers/web.pod:",
		"podmin.deployments.delete(\"api\")  at " + script + ":3:30  [destructive]\n  updated",
		"- workers/api.pod:",
		"podmin.secrets.destroy(\"k\")  at " + script + ":4:27  [destructive]\n  not confirmed",
		"destroyed secret /demo/default/web/k",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	js := c.ok("run", "--dry-run", "-o", "json", script)
	var plan struct {
		Steps []struct {
			Call              string
			Destructive       bool
			NeedsConfirmation bool
		}
	}
	if err := json.Unmarshal([]byte(js), &plan); err != nil || len(plan.Steps) != 3 {
		t.Fatalf("json plan: %v\n%s", err, js)
	}
	for i, want := range []bool{true, false, true} {
		if s := plan.Steps[i]; !s.Destructive || s.NeedsConfirmation != want {
			t.Errorf("step %d %+v: want destructive, needsConfirmation %v", i, s, want)
		}
	}
	c.unchanged(before)
	// The real run still needs the confirmation the plan names.
	c.fails(exitRefused, "pass confirm", "run", script)
	c.unchanged(before)
}

// destructibleCLI is connected to cluster demo with a secret k of Pod web
// and a deployment workers/web: something for each destructive command.
func destructibleCLI(t *testing.T) *cli {
	c := secretCLI(t)
	c.stdin = "a-value-for-k"
	c.ok("secret", "create", "k", "--for", "web", "--stdin")
	c.stdin = ""
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	return c
}
