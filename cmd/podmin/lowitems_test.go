// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"
)

// "podmin help starlark" is text for a terminal: the reference without
// the generator comment and Markdown markup docs/starlark.md carries.
func TestHelpStarlarkIsReadableText(t *testing.T) {
	out := newCLI(t).ok("help", "starlark")
	for _, markup := range []string{"<!--", "```", "| parameter |", "|---", "\n## ", "\n### ", "`podmin"} {
		if strings.Contains(out, markup) {
			t.Errorf("the help holds Markdown %q", markup)
		}
	}
	for _, want := range []string{"Podmin Starlark reference\n=====", "podmin.deployments.deploy(name, *, nodegroup,", "    nodegroup (str)", "CLI: podmin delete."} {
		if !strings.Contains(out, want) {
			t.Errorf("the help lacks %q", want)
		}
	}
}

// An output format is refused on a real run, which has no plan to format,
// rather than accepted and ignored; a dry run honours it.
func TestRunOutputFormatNeedsDryRun(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	script := c.script("hello.star", "print(\"hello\")\n")
	c.fails(exitUsage, "-o json formats the plan of a dry run, and a real run has none", "run", "-o", "json", script)
	c.fails(exitUsage, "-o yaml formats the plan of a dry run", "run", "-o", "yaml", script)
	if out := c.ok("run", "-o", "table", script); out != "hello\n" {
		t.Errorf("a real run with -o table: %q", out)
	}
	if out := c.ok("run", "--dry-run", "-o", "json", script); !strings.Contains(out, `"dryRun": true`) {
		t.Errorf("a dry run with -o json: %q", out)
	}
}

// connect --help says what proves a bucket is Podmin's: the create nonce
// the context records, never the cluster tag, which anyone could copy.
func TestConnectHelpNamesTheNonceAsTheProof(t *testing.T) {
	out := newCLI(t).ok("connect", "--help")
	if strings.Contains(out, "so\nthat only this cluster may ever delete it") || strings.Contains(out, "so that only this cluster may ever delete it") {
		t.Errorf("connect --help says the cluster tag proves ownership:\n%s", out)
	}
	for _, want := range []string{"podmin:create-nonce", "Only that nonce proves"} {
		if !strings.Contains(out, want) {
			t.Errorf("connect --help lacks %q:\n%s", want, out)
		}
	}
}

// An explicit confirm = False is the script's answer, and -y, which
// answers only the calls that give none, does not override it.
func TestConfirmFalseIsNotOverriddenByYes(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	script := c.script("no.star", "podmin.deployments.delete(\"web\", nodegroup = \"workers\", confirm = False)\n")
	c.fails(exitRefused, "the script says confirm = False", "run", "-y", script)
	c.fails(exitRefused, "the script says confirm = False", "run", "--dry-run", script)
	if out := c.ok("list"); !strings.Contains(out, "web") {
		t.Fatalf("a call the script refused deleted web:\n%s", out)
	}
}

// setup reports each CA secret once: in its result, not again in progress
// lines on standard error.
func TestSetupReportsEachCASecretOnce(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	out, errs, code := c.run("setup", "--nodegroup", "web", "-y")
	if code != exitOK {
		t.Fatalf("setup: exit %d\n%s%s", code, out, errs)
	}
	for _, key := range []string{"/demo/_system/workload-ca-key", "/demo/_system/cluster-ca"} {
		if n := strings.Count(out+errs, key); n != 1 {
			t.Errorf("setup reports %s %d times:\n%s%s", key, n, out, errs)
		}
	}
}

// A script argument too large for an int says so, rather than that it is
// not an integer.
func TestRunArgumentOutOfRange(t *testing.T) {
	c := newCLI(t)
	script := c.script("port.star", "def main(ctx, port = 8080, ratio = 0.5):\n    print(port, ratio)\n")
	c.fails(exitUsage, `"99999999999999999999" is out of range: want an integer from -9223372036854775808 to 9223372036854775807`, "run", script, "--", "--port=99999999999999999999")
	c.fails(exitUsage, `"1e999" is out of range`, "run", script, "--", "--ratio=1e999")
	c.fails(exitUsage, `want an integer, got "x"`, "run", script, "--", "--port=x")
	if out := c.ok("run", script, "--", "--port=9223372036854775807"); out != "9223372036854775807 0.5\n" {
		t.Errorf("the largest int: %q", out)
	}
}
