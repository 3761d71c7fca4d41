// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
)

// runnableCommands lists the command paths of the tree that do something.
func runnableCommands() []*cobra.Command {
	var out []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && !c.Hidden {
			out = append(out, c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(&builtins.Env{}))
	return out
}

// args splits a command path into the arguments that call it.
func pathArgs(c *cobra.Command) []string {
	return strings.Fields(strings.TrimPrefix(c.CommandPath(), "podmin"))
}

// TestUsageErrorsComeFirst calls every command with an unknown flag and,
// where it has -o, an unknown format, in a home without any context: the
// usage error must win (exit 2) and end with the subcommand's help.
func TestUsageErrorsComeFirst(t *testing.T) {
	c := newCLI(t)
	for _, cmd := range runnableCommands() {
		path := cmd.CommandPath()
		calls := [][]string{append(pathArgs(cmd), "--no-such-flag")}
		if cmd.Flags().Lookup("output") != nil {
			calls = append(calls, append(pathArgs(cmd), "-o", "xml"))
		}
		for _, args := range calls {
			_, errs, code := c.run(args...)
			if code != exitUsage || !strings.HasSuffix(errs, `run "`+path+` --help"`+"\n") {
				t.Errorf("podmin %s: exit %d, want 2 ending with the help of %q:\n%s", strings.Join(args, " "), code, path, errs)
			}
			if strings.Contains(errs, "context") {
				t.Errorf("podmin %s reached the context check:\n%s", strings.Join(args, " "), errs)
			}
		}
	}
}

// TestExitCodeContract is the table of the README's exit-code contract,
// with every runnable command in at least one row.
func TestExitCodeContract(t *testing.T) {
	fresh := newCLI(t) // no context at all
	c := newCLI(t)
	bucket := c.connectLocal()
	other := newCLI(t)
	other.ok("connect", "theirs", "--provider", "local", "--bucket", filepath.Join(c.root, "foreign"))
	manifest := writeFile(t, c.root, "ds.yaml", "")
	c.ok("init", "web", "-g", "workers", "--image", "hello:v1", "-f", manifest, "--force")
	c.stdin = "value"
	c.ok("secret", "create", "token", "--for", "web", "--stdin")
	c.stdin = ""
	valueFile := writeFile(t, c.root, "value.txt", "another value")
	ok := c.script("ok.star", "def main(ctx):\n    print(ctx.context.cluster)\n")
	failing := c.script("fail.star", "def main(ctx):\n    fail(\"the recipe says no\")\n")
	unconfirmed := c.script("unconfirmed.star", "def main(ctx):\n    podmin.secrets.destroy(\"token\", for_=\"web\")\n")
	tests := c.script("ok_test.star", "def test_ok(t):\n    t.assert.eq(1, 1)\n")
	// A cluster destroy may delete; one whose bucket connect found
	// existing (untagged), whose published configuration another cluster
	// sharing that bucket wrote.
	doomed := newCLI(t)
	doomedBucket := doomed.connectLocal()
	unowned := newCLI(t)
	found := filepath.Join(unowned.root, "found")
	if err := os.Mkdir(found, 0o700); err != nil {
		t.Fatal(err)
	}
	unowned.ok("connect", "found", "--provider", "local", "--bucket", found)
	sharing := newCLI(t)
	sharing.ok("connect", "second", "--provider", "local", "--bucket", found)
	sharing.ok("setup", "--nodegroup", "web", "-y")
	published := filepath.Join(found, "tfstate", "podmin.auto.tfvars.json")

	rows := []struct {
		cli  *cli
		code int
		want string
		args []string
	}{
		// 0 success
		{c, exitOK, "", []string{"version"}},
		{c, exitOK, "", []string{"use"}},
		{c, exitOK, "", []string{"use", "demo"}},
		{c, exitOK, "", []string{"connect", "demo", "--provider", "local", "--bucket", bucket}},
		{c, exitOK, "", []string{"validate", "-f", manifest}},
		{c, exitOK, "", []string{"deploy", "web", "-g", "workers", "-f", manifest}},
		{c, exitOK, "", []string{"list", "-o", "json"}},
		{c, exitOK, "", []string{"preview", "-g", "workers", "-o", "json"}},
		{c, exitOK, "", []string{"delete", "web", "-g", "workers", "-y"}},
		{c, exitOK, "", []string{"secret", "list"}},
		{c, exitOK, "", []string{"secret", "create", "other", "--for", "web", "--file", valueFile}},
		{c, exitOK, "", []string{"secret", "update", "other", "--for", "web", "--file", valueFile}},
		{c, exitOK, "", []string{"secret"}},
		{c, exitOK, "", []string{"run", ok}},
		{c, exitOK, "", []string{"test", tests}},
		{c, exitOK, "", []string{"recipes"}},
		{c, exitFailed, "there is no podmin.star.lock", []string{"recipes", "lock", c.root}},
		{c, exitOK, "", []string{"help", "deploy"}},
		{c, exitOK, "", []string{"help", "starlark"}},
		{c, exitOK, "published the cluster configuration", []string{"setup", "--nodegroup", "web,size=2", "-y"}},
		{c, exitOK, "withdrew the cluster configuration", []string{"teardown", "-y"}},
		{doomed, exitOK, "deleting bucket", []string{"destroy", "-y"}},
		// 1 the operation failed
		{c, exitFailed, "deploy needs --image", []string{"deploy", "api", "-g", "workers"}},
		{c, exitFailed, "rebuild only replaces an index that does not decode", []string{"index", "rebuild", "-y"}},
		{fresh, exitFailed, "needs a current context", []string{"list"}},
		{c, exitFailed, "read manifest", []string{"validate", "-f", filepath.Join(c.root, "none.yaml")}},
		{c, exitFailed, "is not in the local image store", []string{"push", "registry.podmin.internal/apps/nothing:v1"}},
		{c, exitFailed, "has no delete/restore", []string{"secret", "delete", "token", "--for", "web", "-y"}},
		{c, exitFailed, "has no delete/restore", []string{"secret", "restore", "token", "--for", "web"}},
		{c, exitFailed, "", []string{"build", "-t", "x:v1", filepath.Join(c.root, "no-context-dir")}},
		{c, exitFailed, "", []string{"pull", "127.0.0.1:1/none:v1"}},
		{c, exitFailed, "disk-size does not apply to the local provider", []string{"setup", "--nodegroup", "web,disk-size=100", "-y"}},
		{c, exitFailed, "the local provider has no VPC", []string{"setup", "--vpc-cidr", "10.0.0.0/16", "--nodegroup", "web", "-y"}},
		{fresh, exitFailed, "needs a current context", []string{"setup", "--nodegroup", "web", "-y"}},
		{fresh, exitFailed, "needs a current context", []string{"teardown", "-y"}},
		{doomed, exitFailed, "needs a current context", []string{"destroy", "-y"}}, // the destroy above removed it
		// 2 usage, before any context or network access
		{fresh, exitUsage, `unknown output format "xml"`, []string{"list", "-o", "xml"}},
		{fresh, exitUsage, `invalid NodeGroup ID "Bad_Group"`, []string{"delete", "web", "-g", "Bad_Group"}},
		{fresh, exitUsage, `invalid NodeGroup ID "Bad_Group"`, []string{"deploy", "web", "-g", "Bad_Group", "--image", "hello:v1"}},
		{fresh, exitUsage, `invalid NodeGroup ID "Bad_Group"`, []string{"init", "web", "-g", "Bad_Group", "--image", "hello:v1"}},
		{fresh, exitUsage, `required flag(s) "nodegroup" not set`, []string{"preview"}},
		{fresh, exitUsage, "accepts 1 arg(s), received 0", []string{"delete"}},
		{fresh, exitUsage, "accepts at most 1 arg(s)", []string{"use", "a", "b"}},
		{fresh, exitUsage, `unknown command "nosuch"`, []string{"nosuch"}},
		{fresh, exitUsage, "unknown flag: --bogus", []string{"push", "x:v1", "--bogus"}},
		{fresh, exitUsage, "unknown shorthand flag", []string{"secret", "list", "-z"}},
		{fresh, exitUsage, `invalid cluster ID "Bad_ID"`, []string{"connect", "Bad_ID", "--provider", "local", "--bucket", "b"}},
		{fresh, exitUsage, `unknown provider "gcp"`, []string{"connect", "new", "--provider", "gcp", "--bucket", "b"}},
		{fresh, exitUsage, `unknown secrets provider "vault"`, []string{"secret", "list", "--provider", "vault"}},
		{fresh, exitUsage, `"a/b" is not a safe key`, []string{"secret", "destroy", "a/b", "--for", "web", "-y"}},
		{fresh, exitUsage, "unknown flag: --node-group", []string{"setup", "--node-group", "web", "-y"}},
		{fresh, exitUsage, `--nodegroup "Bad_Group"`, []string{"setup", "--nodegroup", "Bad_Group", "-y"}},
		{fresh, exitUsage, `"size" is not KEY=VALUE`, []string{"setup", "--nodegroup", "web,size", "-y"}},
		{fresh, exitUsage, `unknown command "demo" for "podmin teardown"`, []string{"teardown", "demo", "-y"}},
		{fresh, exitUsage, `unknown output format "xml"`, []string{"destroy", "-y", "-o", "xml"}},
		{c, exitUsage, "is a directory: pass a recipe file", []string{"run", c.root}},
		{c, exitUsage, "want an integer", []string{"run", c.script("n.star", "def main(ctx, n = 1):\n    pass\n"), "--", "--n=x"}},
		// 3 the one thing asked for does not exist
		{c, exitNotFound, "deployment workers/nope does not exist", []string{"delete", "nope", "-g", "workers", "-y"}},
		{c, exitNotFound, `unknown context "nope"`, []string{"use", "nope"}},
		{c, exitNotFound, `unknown context "nope"`, []string{"disconnect", "nope"}},
		{c, exitNotFound, "secret not found", []string{"secret", "update", "absent", "--for", "web", "--file", valueFile}},
		{c, exitNotFound, "secret not found", []string{"secret", "destroy", "absent", "--for", "web", "-y"}},
		{c, exitNotFound, "no such file or directory", []string{"run", filepath.Join(c.root, "missing.star")}},
		// 4 refused for safety
		{c, exitRefused, "pass --yes (-y)", []string{"delete", "web", "-g", "workers"}},
		{c, exitRefused, "pass --yes (-y)", []string{"secret", "destroy", "token", "--for", "web"}},
		{c, exitRefused, "pass --yes (-y)", []string{"disconnect", "demo"}},
		{c, exitRefused, "is tagged podmin:cluster=theirs", []string{"connect", "new", "--provider", "local", "--bucket", filepath.Join(c.root, "foreign")}},
		{c, exitRefused, "not confirmed", []string{"run", unconfirmed}},
		{c, exitRefused, "pass --yes (-y) to podmin setup", []string{"setup", "--nodegroup", "web"}},
		{c, exitRefused, "pass --yes (-y) to podmin teardown", []string{"teardown"}},
		{c, exitRefused, "pass --yes (-y) to podmin destroy", []string{"destroy"}},
		{unowned, exitRefused, `bucket "` + found + `" has no podmin:cluster tag`, []string{"destroy", "-y"}},
		{unowned, exitRefused, `names cluster "second", not "found"`, []string{"teardown", "-y"}},
		// 5 the recipe's own failure
		{c, exitScript, "the recipe says no", []string{"run", failing}},
		{c, exitScript, "syntax.star:1:", []string{"run", c.script("syntax.star", "def (\n")}},
		{c, exitScript, "tests failed: 1 of 1", []string{"test", c.script("bad_test.star", "def test_bad(t):\n    t.assert.eq(1, 2)\n")}},
	}
	// install, uninstall (cloudflared) and fetch
	rows = append(rows, installExitRows(t, fresh, other)...)
	rows = append(rows, fetchExitRows(t, fresh, c)...)
	rows = append(rows, statusExitRows(t, fresh, c)...)
	covered := map[string]bool{}
	for _, r := range rows {
		t.Run(strings.Join(r.args, " "), func(t *testing.T) {
			r.cli.t = t
			_, errs, code := r.cli.run(r.args...)
			if code != r.code || !strings.Contains(errs, r.want) {
				t.Errorf("exit %d, want %d with %q:\n%s", code, r.code, r.want, errs)
			}
		})
		root := newRoot(&builtins.Env{})
		if cmd, _, err := root.Find(r.args); err == nil {
			covered[cmd.CommandPath()] = true
		}
	}
	c.t = t
	// The refusals and failures above changed nothing; the one destroy
	// that succeeded deleted its bucket.
	for _, p := range []string{bucket, found, published, filepath.Join(c.root, "data", "podmin", "secrets", "demo", "_system", "cluster-ca")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("a refused or failed command removed it: %v", err)
		}
	}
	if _, err := os.Stat(doomedBucket); !os.IsNotExist(err) {
		t.Errorf("destroy -y left its bucket: %v", err)
	}
	for _, cl := range []*cli{c, unowned} {
		cl.t = t
		if out := cl.ok("use", "-o", "json"); !strings.Contains(out, `"current": true`) {
			t.Errorf("a refused command removed the current context:\n%s", out)
		}
	}
	for _, cmd := range runnableCommands() {
		if !covered[cmd.CommandPath()] && !slices.Contains([]string{"podmin repl", "podmin completion"}, cmd.CommandPath()) {
			// repl runs on a pseudo-terminal (TestREPLInPseudoTerminal);
			// completion's shells are rows of their own below.
			if !strings.HasPrefix(cmd.CommandPath(), "podmin completion ") && !strings.HasPrefix(cmd.CommandPath(), "podmin __") {
				t.Errorf("%s has no row in the exit-code table", cmd.CommandPath())
			}
		}
	}
}

// TestDeadlineExitCode checks 124 for an operation whose deadline passed.
func TestDeadlineExitCode(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	loop := c.script("loop.star", "def main(ctx):\n    while True:\n        pass\n")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"run", loop}, strings.NewReader(""), &out, &errb, func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
	if code != exitDeadline {
		t.Fatalf("exit %d, want 124:\n%s", code, errb.String())
	}
}
