// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"fmt"
	"sort"
	"strings"

	star "go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// Overview introduces the Starlark host; it heads docs/starlark.md and
// "podmin help starlark".
const Overview = `Podmin recipes are Starlark files that drive the same operations as the CLI.

    podmin run FILE [-- --key=value ...]   execute FILE, then main(ctx, **params) if defined
    podmin run --dry-run FILE              real reads, recorded writes, print the plan
    podmin test [-run RE] [-v] [PATH ...]  run test_*(t) in every *_test.star
    podmin repl [FILE]                     interactive session, optionally pre-loading FILE

Every builtin below calls the same Go function as the CLI command it names.
Keyword names equal the CLI flag names with "-" replaced by "_"; the subject
(CLUSTER or NAME) is the only positional argument. Repeatable flags take a list
(image= and env= also take a dict). Results are frozen structs that print with
their constructor name; lists are sorted.

main(ctx, **params): command-line --key=value arguments are converted to the type
of each parameter's default (bool, int, float, string, list of strings); a
parameter without a default is required; "-- --help" prints the docstring and
the parameters. ctx.args holds the arguments, ctx.context the current context
(cluster, provider, region, bucket) or None, ctx.dry_run whether writes are
recorded. A parameter whose default is podmin.secret_param() takes a secret:
def main(ctx, token = podmin.secret_param()) receives --token=… as a secret
value (as podmin.secret returns), registered with the scrubber while the
arguments are parsed, so neither the parameter nor ctx.args ever holds it as a
str and printing either shows <secret token>; it is None when not given
(podmin.secret_param(required = True) makes it required).

load(): "./lib.star" is relative to the loading file; "//lib/x.star" is relative
to the recipe root (the nearest directory upward holding podmin.star.lock, else
the git repository root); "@name//x.star" is a shared recipe repository pinned in
podmin.star.lock, as {"recipes": {"name": {"path": "../dir"}}} or
{"recipes": {"name": {"git": "URL", "commit": "40-hex"}}} (cloned once into
<cache>/recipes/<name>/<commit> and verified by commit). Loaded modules are frozen.
"podmin recipes add NAME SOURCE@PIN" and "podmin recipes update [NAME]" move a
pin after showing the diff of every .star file, and write the lock only once
accepted (a prompt, or --yes).

Dry run: --dry-run runs the very same operations, over recording boundaries.
Every read is real; every write (the cluster bucket, secrets, the contexts file,
local files, the local image store) lands in an in-memory copy-on-write overlay
that later reads in the same run see, so a script can branch on real results
(a dry run on a machine without a context can connect, then deploy into the
planned cluster). Nothing real is modified. The plan lists each builtin call
with the net change of every object, secret, context and file it wrote:
JSON documents (deployments/index.json, contexts.json) field by field, text
(Pods, Services, manifests) as a line diff, secrets by name and action only.
With -o json standard output carries only the plan; print() goes to stderr.

Tests: podmin test runs each test_*(t) in a sandbox of its own: a fresh local
bucket connected as cluster "test", its own contexts, its own local secrets
store and a scratch directory that every file the test writes lands in
(absolute paths included). time.now() is the test's virtual clock: it starts at
2026-01-02T03:04:05Z and moves only with the pauses of waits. Network access fails with
"network access is disabled in podmin test"; t.fake_registry() starts an
in-memory OCI registry the test may reach, and .image(name, platforms=[...])
stores a random image there and returns the reference to pull:

    def test_pull(t):
        ref = t.fake_registry().image("apps/hello:v1", platforms = ["linux/amd64"])
        t.assert.eq(podmin.images.pull(ref).platforms, ["linux/amd64"])

A test has no node agents. t.fake_nodes(nodegroup, nodes = 3, state = "ready")
stands in for a NodeGroup's nodes and their leader: from the call on, the leader
holds the lease, and whenever a wait pauses it publishes what changed of the
NodeGroup's status object (the real formats), every node reporting the committed
revision of each deployment as "ready", "not-ready", "error" (a kubelet error) or
"stopped" (every node missing). Waits run on the test's virtual clock, and a
virtual second costs a few reads and no write, so a timeout of minutes ends at
once (ten virtual minutes take about 0.15 s):

    def test_canary_gate(t):
        t.fake_nodes("canary", state = "not-ready")
        podmin.deployments.deploy("web", nodegroup = "canary", image = "hello:v2")
        t.fails(lambda: podmin.deployments.wait("web", nodegroup = "canary"), "timed out")

t also has name, workdir, assert.eq/ne/true/contains(x, y, msg=),
fails(fn, "regexp") and run(main, **kwargs). -run REGEX selects test functions;
a passing test's print() output is shown only with -v.

Also predeclared: json, time (time.now() follows the injected clock), math.
Language: set, while, top-level if/for, global reassignment and recursion are
allowed. A step limit ends runaway loops.

Exit codes of run and test: 0 success, 1 Podmin failed (also a pinned
repository that cannot be fetched), 2 bad usage (bad --key=value arguments, and
a bad value given to a built-in: nodegroup = "Bad_Group", cpu = "nan", until =
"running"), 3 what a built-in asked for does not exist, 4 a destructive
operation was not confirmed, 5 the script failed (error, fail(), a wrong
argument type, failed test), 6 the outcome of a write is unknown.`

// Markdown renders the whole reference: docs/starlark.md.
func Markdown() string {
	var b strings.Builder
	b.WriteString("<!-- Code generated by go generate ./starlark; DO NOT EDIT. -->\n\n# Podmin Starlark reference\n\n")
	b.WriteString(Overview + "\n\n" + Safety)
	all := Builtins()
	sort.SliceStable(all, func(i, j int) bool { return groupOf(all[i]) < groupOf(all[j]) })
	group := ""
	for _, bi := range all {
		g := groupOf(bi)
		if g != group {
			group = g
			fmt.Fprintf(&b, "\n## %s\n", g)
		}
		fmt.Fprintf(&b, "\n### `%s`\n\n", bi.FullName())
		fmt.Fprintf(&b, "```python\n%s\n```\n\n", bi.Signature())
		b.WriteString(bi.Doc + "\n")
		if bi.Command != "" {
			fmt.Fprintf(&b, "\nCLI: `podmin %s`.", bi.Command)
			if bi.Mutates {
				b.WriteString(" Under `--dry-run` its writes are recorded in the plan, not performed.")
			}
			b.WriteString("\n")
		}
		if len(bi.Params) > 0 {
			b.WriteString("\n| parameter | type | |\n|---|---|---|\n")
			for _, p := range bi.Params {
				req := ""
				if p.Required {
					req = " (required)"
				}
				fmt.Fprintf(&b, "| `%s` | %s | %s%s |\n", p.Name, strings.ReplaceAll(p.Type, "|", "\\|"), p.Doc, req)
			}
		}
	}
	return b.String()
}

// Help returns the help text of a value: a builtin's signature and
// docstring, a module's members, a function's docstring.
func Help(v star.Value) string {
	switch v := v.(type) {
	case *star.Builtin:
		if b, ok := Lookup(v.Name()); ok {
			return b.Signature() + "\n\n" + b.Doc + "\n"
		}
		return v.Name() + ": a Starlark built-in function\n"
	case *starlarkstruct.Module:
		var b strings.Builder
		fmt.Fprintf(&b, "module %s:\n", v.Name)
		names := v.AttrNames()
		sort.Strings(names)
		for _, n := range names {
			full := v.Name + "." + n
			if bi, ok := Lookup(full); ok {
				summary, _, _ := strings.Cut(bi.Doc, "\n")
				fmt.Fprintf(&b, "  %-22s %s\n", n, summary)
			} else {
				fmt.Fprintf(&b, "  %s\n", n)
			}
		}
		return b.String()
	case *star.Function:
		doc := strings.TrimSpace(v.Doc())
		if doc == "" {
			doc = "(no docstring)"
		}
		return fmt.Sprintf("%s: %s\n", v.Name(), doc)
	}
	if s, ok := v.(star.HasAttrs); ok {
		return fmt.Sprintf("%s value with attributes: %s\n", v.Type(), strings.Join(s.AttrNames(), ", "))
	}
	return fmt.Sprintf("%s value\n", v.Type())
}
