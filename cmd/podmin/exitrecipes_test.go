// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	pstar "podmin.dev/podmin/starlark"
)

// noValueRule lists the built-ins that have no usage row in a recipe, and
// why: none of their arguments can break a rule of its value. (A wrong
// type or an unknown keyword is the script's own mistake, exit 5.) A new
// built-in gets a usage row, or a line here that says why it has none.
var noValueRule = map[string]string{
	"cluster.destroy":     "takes nothing but confirm",
	"cluster.teardown":    "takes nothing but confirm",
	"contexts.current":    "takes only default, which may be any value",
	"contexts.list":       "takes nothing",
	"contexts.use":        "its one argument names a context: one that is not saved is not found (3), as for podmin use",
	"contexts.disconnect": "its one argument names a context: one that is not saved is not found (3), as for podmin disconnect",
	"deployments.list":    "takes nothing",
	"secret":              "any string is a value, and key only labels it",
	"version":             "takes nothing",
	"secret_param":        "key only labels the value, and required is a bool",
}

// recipeExitRows call every built-in from a recipe, with a bad value
// (exit 2, as the same value given to its command's flag) and the other
// outcomes its command has. c is connected to cluster demo with the
// secret token of Pod web; fresh has no context.
func recipeExitRows(t *testing.T, fresh, c *cli) []exitRow {
	s := func(name, body string) []string { return []string{"run", c.script(name, body)} }
	sf := func(name, body string) []string { return []string{"run", fresh.script(name, body)} }
	// A recipe that loads from a repository pinned to a git URL that
	// cannot be cloned.
	pinned := filepath.Join(c.root, "pinned")
	if err := os.MkdirAll(pinned, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, pinned, "podmin.star.lock", `{"recipes": {"shared": {"git": "`+filepath.Join(c.root, "no-such-repository.git")+`", "commit": "0123456789abcdef0123456789abcdef01234567"}}}`)
	loads := writeFile(t, pinned, "main.star", "load(\"@shared//lib.star\", \"x\")\n")
	return []exitRow{
		// a pinned repository that cannot be fetched: the operation failed
		{c, exitFailed, "repository @shared: clone ", []string{"run", loads}},
		// bad values: usage, as on the command line
		{c, exitUsage, `invalid NodeGroup ID "Bad_Group"`, s("u-setup.star", "podmin.cluster.setup(nodegroup = \"Bad_Group\", confirm = True)\n")},
		{c, exitUsage, `size "abc" is not valid`, s("u-setup2.star", "podmin.cluster.setup(nodegroup = \"web,size=abc\", confirm = True)\n")},
		{c, exitUsage, `invalid cluster ID "Bad_ID"`, s("u-connect.star", "podmin.contexts.connect(\"Bad_ID\", provider = \"local\", bucket = \"bucket-b\")\n")},
		{c, exitUsage, `unknown provider "gcp"`, s("u-connect2.star", "podmin.contexts.connect(\"new\", provider = \"gcp\", bucket = \"bucket-b\")\n")},
		{c, exitUsage, `invalid NodeGroup ID "Bad_Group"`, s("u-deploy.star", "podmin.deployments.deploy(\"web\", nodegroup = \"Bad_Group\", image = \"hello:v1\")\n")},
		{c, exitUsage, `cpu "nan": must be a positive Kubernetes quantity`, s("u-deploy2.star", "podmin.deployments.deploy(\"web\", nodegroup = \"workers\", image = \"hello:v1\", cpu = \"nan\")\n")},
		{c, exitUsage, "wait = soon: wait for applied or ready", s("u-deploy3.star", "podmin.deployments.deploy(\"web\", nodegroup = \"workers\", image = \"hello:v1\", wait = \"soon\")\n")},
		{c, exitUsage, `invalid NodeGroup ID "Bad_Group"`, s("u-get.star", "podmin.deployments.get(\"web\", nodegroup = \"Bad_Group\")\n")},
		{c, exitUsage, `invalid NodeGroup ID "Bad_Group"`, s("u-delete.star", "podmin.deployments.delete(\"web\", nodegroup = \"Bad_Group\", confirm = True)\n")},
		{c, exitUsage, `invalid NodeGroup ID "Bad_Group"`, s("u-history.star", "podmin.deployments.history(\"web\", nodegroup = \"Bad_Group\")\n")},
		{c, exitUsage, `to_revision = must be a revision number`, s("u-rollback.star", "podmin.deployments.rollback(\"web\", nodegroup = \"workers\", to_revision = -1)\n")},
		{c, exitUsage, `invalid NodeGroup ID "Bad_Group"`, s("u-preview.star", "podmin.deployments.preview(nodegroup = \"Bad_Group\")\n")},
		{c, exitUsage, "a deployment name needs its NodeGroup", s("u-status.star", "podmin.deployments.status(\"web\")\n")},
		{c, exitUsage, `until = "running": wait until "ready" or "applied"`, s("u-wait.star", "podmin.deployments.wait(\"web\", nodegroup = \"workers\", until = \"running\")\n")},
		{c, exitUsage, `timeout = "soon"`, s("u-wait2.star", "podmin.deployments.wait(\"web\", nodegroup = \"workers\", timeout = \"soon\")\n")},
		{c, exitUsage, `unknown architecture "riscv64"`, s("u-fetch.star", "podmin.deps.fetch(arch = [\"riscv64\"])\n")},
		{c, exitUsage, `platform "linux" must be OS/ARCH`, s("u-build.star", "podmin.images.build(\".\", tag = [\"x:v1\"], platform = [\"linux\"])\n")},
		{c, exitUsage, "is not a valid image reference", s("u-pull.star", "podmin.images.pull(\"Bad Ref\")\n")},
		{c, exitUsage, "mirror/ is reserved", s("u-push.star", "podmin.images.push(\"hello:v1\", destination = \"mirror/pause:3.10\")\n")},
		{c, exitUsage, `pick "nonsense"`, s("u-rebuild.star", "podmin.index.rebuild(pick = [\"nonsense\"], confirm = True)\n")},
		{c, exitUsage, `invalid NodeGroup ID "Bad_Group"`, s("u-install.star", "podmin.install.cloudflared(nodegroup = \"Bad_Group\")\n")},
		{c, exitUsage, `unknown secrets provider "vault"`, s("u-install2.star", "podmin.install.cloudflared(nodegroup = \"edge\", provider = \"vault\")\n")},
		{c, exitUsage, `invalid NodeGroup ID "Bad_Group"`, s("u-uninstall.star", "podmin.uninstall.cloudflared(nodegroup = \"Bad_Group\", confirm = True)\n")},
		{c, exitUsage, `cpu "nan": must be a positive Kubernetes quantity`, s("u-init.star", "podmin.manifests.init(\"web\", nodegroup = \"workers\", image = \"hello:v1\", cpu = \"nan\", file = \"never.yaml\")\n")},
		{c, exitUsage, "is not a valid image reference", s("u-validate.star", "podmin.manifests.validate(file = \"nothere.yaml\", image = \"Bad Image\")\n")},
		{c, exitUsage, `"a/b" is not a safe key`, s("u-create.star", "podmin.secrets.create(\"a/b\", for_ = \"web\", value = \"some value\")\n")},
		{c, exitUsage, `"a/b" is not a safe key`, s("u-update.star", "podmin.secrets.update(\"a/b\", for_ = \"web\", value = \"some value\")\n")},
		{c, exitUsage, `"a/b" is not a safe key`, s("u-read.star", "podmin.secrets.read(\"a/b\", for_ = \"web\")\n")},
		{c, exitUsage, `"a/b" is not a safe key`, s("u-sdelete.star", "podmin.secrets.delete(\"a/b\", for_ = \"web\", confirm = True)\n")},
		{c, exitUsage, `"a/b" is not a safe key`, s("u-restore.star", "podmin.secrets.restore(\"a/b\", for_ = \"web\")\n")},
		{c, exitUsage, `"a/b" is not a safe key`, s("u-destroy.star", "podmin.secrets.destroy(\"a/b\", for_ = \"web\", confirm = True)\n")},
		{c, exitUsage, "no Pod given", s("u-create2.star", "podmin.secrets.create(\"k\", value = \"some value\")\n")},
		{c, exitUsage, "system keys belong to no namespace or Pod", s("u-list.star", "podmin.secrets.list(for_ = \"web\", system = True)\n")},
		{c, exitUsage, `unknown secrets provider "vault"`, s("u-list2.star", "podmin.secrets.list(provider = \"vault\")\n")},
		// not found: the one thing asked for
		{c, exitNotFound, "deployment workers/nope is not in the deployment index", s("n-status.star", "podmin.deployments.status(\"nope\", nodegroup = \"workers\")\n")},
		{c, exitNotFound, "deployment workers/nope is not in the deployment index", s("n-wait.star", "podmin.deployments.wait(\"nope\", nodegroup = \"workers\", timeout = \"10s\")\n")},
		{c, exitNotFound, "deployment workers/nope is not in the deployment index", s("n-history.star", "podmin.deployments.history(\"nope\", nodegroup = \"workers\")\n")},
		{c, exitNotFound, "no such revision", s("n-rollback.star", "podmin.deployments.rollback(\"nope\", nodegroup = \"workers\")\n")},
		{c, exitNotFound, `unknown context "nope"`, s("n-disconnect.star", "podmin.contexts.disconnect(\"nope\", confirm = True)\n")},
		{c, exitNotFound, "secret not found", s("n-read.star", "podmin.secrets.read(\"absent\", for_ = \"web\")\n")},
		// refused for safety
		{c, exitRefused, "podmin.cluster.destroy is destructive", s("r-destroy.star", "podmin.cluster.destroy()\n")},
		{c, exitRefused, "podmin.cluster.teardown is destructive", s("r-teardown.star", "podmin.cluster.teardown()\n")},
		// failed
		{fresh, exitFailed, "no current context", sf("f-current.star", "podmin.contexts.current()\n")},
		{c, exitFailed, "has no delete/restore", s("f-sdelete.star", "podmin.secrets.delete(\"token\", for_ = \"web\", confirm = True)\n")},
		{c, exitFailed, "has no delete/restore", s("f-restore.star", "podmin.secrets.restore(\"token\", for_ = \"web\")\n")},
		{c, exitFailed, "already exists", s("f-create.star", "podmin.secrets.create(\"token\", for_ = \"web\", value = \"another value\")\n")},
		// the script's own mistake
		{c, exitScript, "for parameter value: got int, want str or secret", s("x-secret.star", "podmin.secret(1)\n")},
		// success
		{c, exitOK, "", s("ok-builtins.star", "print(podmin.version().version, len(podmin.contexts.list()), podmin.contexts.current().cluster, len(podmin.deployments.list()), len(podmin.secrets.list().secrets))\nprint(podmin.secret(\"a value of the script\", key = \"k\"))\n")},
		{c, exitOK, "", s("ok-secret-param.star", "def main(ctx, token = podmin.secret_param()):\n    print(ctx.args, token)\n")},
	}
}

// builtinCall finds the built-ins a recipe calls, and the one whose error
// a backtrace reports.
var (
	builtinCall   = regexp.MustCompile(`podmin\.([a-z_]+(?:\.[a-z_]+)*)\(`)
	builtinFailed = regexp.MustCompile(`error in podmin\.([a-z_]+(?:\.[a-z_]+)*):`)
)

// recipeClasses records, per built-in, the exit statuses recipe rows
// produced: the failing built-in's for a failure, every built-in the
// script calls for a success.
func recipeClasses(classes map[string]map[int]bool, r exitRow, code int, stderr string) {
	if len(r.args) < 2 || r.args[0] != "run" {
		return
	}
	var names []string
	if code != exitOK {
		if m := builtinFailed.FindStringSubmatch(stderr); m != nil {
			names = []string{m[1]}
		}
	} else if data, err := os.ReadFile(r.args[len(r.args)-1]); err == nil {
		for _, m := range builtinCall.FindAllStringSubmatch(string(data), -1) {
			names = append(names, m[1])
		}
	}
	for _, n := range names {
		if classes[n] == nil {
			classes[n] = map[int]bool{}
		}
		classes[n][code] = true
	}
}

// checkBuiltinRows requires a recipe row for every built-in of the
// registry, and a usage row (exit 2) for each one whose arguments have
// rules, so a new built-in cannot be left out of the contract.
func checkBuiltinRows(t *testing.T, classes map[string]map[int]bool) {
	t.Helper()
	var summary []string
	for _, b := range pstar.Builtins() {
		got := classes[b.Name]
		if len(got) == 0 {
			t.Errorf("podmin.%s has no row in a recipe in the exit-code table", b.Name)
			continue
		}
		_, exempt := noValueRule[b.Name]
		if !got[exitUsage] && !exempt {
			t.Errorf("podmin.%s has no usage row (exit 2) in a recipe: add one with a bad value, or say in noValueRule why none exists", b.Name)
		}
		if got[exitUsage] && exempt {
			t.Errorf("podmin.%s has a usage row, but noValueRule says it has no value rule", b.Name)
		}
		var codes []int
		for code := range got {
			codes = append(codes, code)
		}
		sort.Ints(codes)
		summary = append(summary, fmt.Sprintf("podmin.%s: %v", b.Name, codes))
	}
	for name := range noValueRule {
		if !slices.ContainsFunc(pstar.Builtins(), func(b *pstar.Builtin) bool { return b.Name == name }) {
			t.Errorf("noValueRule names podmin.%s, which is no built-in", name)
		}
	}
	t.Logf("statuses per built-in in recipes:\n%s", strings.Join(summary, "\n"))
}
