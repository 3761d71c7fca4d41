// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/state"
)

// ambiguousCLI is connected to a bucket whose index writes are applied but
// whose replies are lost, and whose index cannot be read back afterwards:
// the outcome of every write to the index is unknown.
func ambiguousCLI(t *testing.T) *cli {
	c := newCLI(t)
	c.connectLocal()
	c.adjust = func(e *builtins.Env) {
		e.Commit = state.CommitOptions{MaxAttempts: 2, BaseDelay: 1, MaxDelay: 1}
		e.WrapStore = func(s objstore.Store) objstore.Store {
			return faultstore.New(s, faultstore.WithRules(
				faultstore.Rule{Action: faultstore.Ambiguous, Ops: []faultstore.Op{faultstore.OpPutIfAbsent, faultstore.OpPutIfMatch}, Prefix: state.IndexPath},
				faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpGet, faultstore.OpHead}, Prefix: state.IndexPath, Skip: 1},
			))
		}
	}
	return c
}

// goneCLI is connected to a local bucket that was deleted afterwards.
func goneCLI(t *testing.T) *cli {
	c := newCLI(t)
	bucket := filepath.Join(c.root, "gone")
	c.ok("connect", "gone", "--provider", "local", "--bucket", bucket)
	if err := os.RemoveAll(bucket); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestExitCodeContract is the table of the README's exit-status contract:
// every runnable command in a row for each class of outcome it can
// produce, and the built-ins inside recipes (podmin run and podmin test)
// with the status their commands have.
func TestExitCodeContract(t *testing.T) {
	fresh := newCLI(t) // no context at all
	c := newCLI(t)
	bucket := c.connectLocal()
	other := newCLI(t)
	other.ok("connect", "theirs", "--provider", "local", "--bucket", filepath.Join(c.root, "foreign"))
	manifest := writeFile(t, c.root, "ds.yaml", "")
	c.ok("init", "web", "-g", "workers", "--image", "hello:v1", "-f", manifest, "--force")
	invalid := writeFile(t, c.root, "invalid.yaml", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: web\n")
	c.stdin = "value"
	c.ok("secret", "create", "token", "--for", "web", "--stdin")
	c.ok("secret", "create", "doomed", "--for", "web", "--stdin")
	c.ok("secret", "create", "in-recipe", "--for", "web", "--stdin")
	c.stdin = ""
	c.ok("connect", "spare", "--provider", "local", "--bucket", filepath.Join(c.root, "spare"))
	c.ok("use", "demo")
	valueFile := writeFile(t, c.root, "value.txt", "another value")
	buildDir := buildContext(t, c.root)
	lockDir := filepath.Join(c.root, "locked")
	if err := os.MkdirAll(filepath.Join(lockDir, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, lockDir, "podmin.star.lock", `{"recipes": {"lib": {"path": "./lib"}}}`)
	writeFile(t, filepath.Join(lockDir, "lib"), "x.star", "x = 1\n")
	// A locked recipe root whose path repository changed since: an update
	// has something to accept.
	movedDir := filepath.Join(c.root, "moved")
	if err := os.MkdirAll(filepath.Join(movedDir, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(movedDir, "lib"), "x.star", "x = 1\n")
	writeFile(t, movedDir, "podmin.star.lock", `{"recipes": {"lib": {"path": "./lib"}}}`)
	c.ok("recipes", "lock", movedDir)
	writeFile(t, filepath.Join(movedDir, "lib"), "x.star", "x = 2\n")
	script := func(name, body string) string { return c.script(name, body) }
	ok := script("ok.star", "def main(ctx):\n    print(ctx.context.cluster)\n")
	failing := script("fail.star", "def main(ctx):\n    fail(\"the recipe says no\")\n")
	unconfirmed := script("unconfirmed.star", "def main(ctx):\n    podmin.secrets.destroy(\"token\", for_=\"web\")\n")
	named := script("named.star", "podmin.deployments.delete(\"web\", nodegroup = \"workers\", confirm = \"prod\")\n")
	destructiveDryRun := script("cleanup.star", "podmin.deployments.delete(\"nothing\", nodegroup = \"workers\", ignore_not_found = True)\n")
	loop := script("loop.star", "def main(ctx):\n    while True:\n        pass\n")
	tests := script("ok_test.star", "def test_ok(t):\n    t.assert.eq(1, 1)\n")
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
	// A bucket connect created whose tags lost the nonce it recorded.
	retagged := newCLI(t)
	retaggedBucket := retagged.connectLocal()
	if err := os.WriteFile(filepath.Join(retaggedBucket, ".podmin", "tags.json"), []byte(`{"podmin:cluster":"demo"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	gone := goneCLI(t)
	amb := ambiguousCLI(t)
	repl := newCLI(t)
	repl.connectLocal()
	repl.stdin = "print(1 + 2)\n"
	upstream := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(upstream.Close)
	remoteImage := strings.TrimPrefix(upstream.URL, "http://") + "/team/web:v1"
	idx, err := random.Index(64, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(parseRef(t, remoteImage), idx, remote.WithContext(t.Context())); err != nil {
		t.Fatal(err)
	}

	rows := []exitRow{
		// connect
		{c, exitOK, "", []string{"connect", "demo", "--provider", "local", "--bucket", bucket}},
		{fresh, exitUsage, `invalid cluster ID "Bad_ID"`, []string{"connect", "Bad_ID", "--provider", "local", "--bucket", "b"}},
		{fresh, exitUsage, `unknown provider "gcp"`, []string{"connect", "new", "--provider", "gcp", "--bucket", "b"}},
		{fresh, exitUsage, `required flag(s) "bucket" not set`, []string{"connect", "new", "--provider", "local"}},
		{c, exitFailed, "the local provider has one region", []string{"connect", "new", "--provider", "local", "--bucket", "new-bucket", "--region", "eu-west-1"}},
		{c, exitRefused, "is tagged podmin:cluster=theirs", []string{"connect", "new", "--provider", "local", "--bucket", filepath.Join(c.root, "foreign")}},
		// use
		{c, exitOK, "", []string{"use"}},
		{c, exitOK, "", []string{"use", "demo"}},
		{fresh, exitUsage, "accepts at most 1 arg(s)", []string{"use", "a", "b"}},
		{c, exitNotFound, `unknown context "nope"`, []string{"use", "nope"}},
		// disconnect
		{c, exitNotFound, `unknown context "nope"`, []string{"disconnect", "nope"}},
		{c, exitRefused, "pass --yes (-y)", []string{"disconnect", "demo"}},
		{fresh, exitUsage, "accepts 1 arg(s), received 0", []string{"disconnect"}},
		{c, exitOK, "", []string{"disconnect", "spare", "-y"}},
		// init
		{c, exitOK, "", []string{"init", "web", "-g", "workers", "--image", "hello:v1", "-f", manifest}},
		{fresh, exitUsage, `invalid NodeGroup ID "Bad_Group"`, []string{"init", "web", "-g", "Bad_Group", "--image", "hello:v1"}},
		{fresh, exitUsage, "at least one image is required", []string{"init", "web", "-g", "workers"}},
		{fresh, exitUsage, `required flag(s) "nodegroup" not set`, []string{"init", "web", "--image", "hello:v1"}},
		{fresh, exitUsage, "must be a positive Kubernetes quantity", []string{"init", "web", "-g", "workers", "--image", "hello:v1", "--cpu", "nan"}},
		{c, exitFailed, "already exists and holds a different manifest", []string{"init", "web", "-g", "workers", "--image", "hello:v2", "-f", manifest}},
		// validate
		{c, exitOK, "", []string{"validate", "-f", manifest}},
		{fresh, exitUsage, `required flag(s) "file" not set`, []string{"validate"}},
		{fresh, exitUsage, "is not a valid image reference", []string{"validate", "-f", manifest, "--image", "Bad Image"}},
		{c, exitNotFound, "no such file or directory", []string{"validate", "-f", filepath.Join(c.root, "none.yaml")}},
		{c, exitFailed, "spec.template", []string{"validate", "-f", invalid}},
		// deploy
		{c, exitOK, "", []string{"deploy", "web", "-g", "workers", "-f", manifest}},
		{fresh, exitUsage, "deploy needs --image", []string{"deploy", "api", "-g", "workers"}},
		{fresh, exitUsage, "--namespace shapes the built-in manifest and cannot be combined with --file", []string{"deploy", "web", "-g", "workers", "-f", manifest, "--namespace", "x"}},
		{fresh, exitUsage, `invalid NodeGroup ID "Bad_Group"`, []string{"deploy", "web", "-g", "Bad_Group", "--image", "hello:v1"}},
		{fresh, exitUsage, `required flag(s) "nodegroup" not set`, []string{"deploy", "web", "--image", "hello:v1"}},
		{fresh, exitFailed, "needs a current context", []string{"deploy", "web", "-g", "workers", "--image", "hello:v1"}},
		{gone, exitFailed, "does not exist", []string{"deploy", "web", "-g", "workers", "--image", "hello:v1"}},
		{c, exitFailed, `does not match the deployment name "api"`, []string{"deploy", "api", "-g", "workers", "-f", manifest}},
		{c, exitRefused, "would replace that: nothing was created or saved", []string{"run", script("replace.star", "podmin.contexts.connect(\"demo\", provider = \"local\", bucket = \"demo-bukket\")\n")}},
		{amb, exitUnknown, "outcome of the index write is unknown", []string{"deploy", "web", "-g", "workers", "--image", "hello:v1"}},
		// history and rollback (a second revision of web, rolled back)
		{c, exitOK, "", []string{"deploy", "web", "-g", "workers", "-f", manifest, "--image", "hello:v2"}},
		{c, exitOK, "", []string{"history", "web", "-g", "workers", "-o", "json"}},
		{fresh, exitUsage, `required flag(s) "nodegroup" not set`, []string{"history", "web"}},
		{fresh, exitUsage, `invalid NodeGroup ID "Bad_Group"`, []string{"history", "web", "-g", "Bad_Group"}},
		{c, exitNotFound, "deployment workers/nope is not in the deployment index", []string{"history", "nope", "-g", "workers"}},
		{gone, exitFailed, "does not exist", []string{"history", "web", "-g", "workers"}},
		{c, exitOK, "", []string{"rollback", "web", "-g", "workers"}},
		{fresh, exitUsage, "--to-revision must be a revision number (1 or more), not -1", []string{"rollback", "web", "-g", "workers", "--to-revision", "-1"}},
		{fresh, exitUsage, `required flag(s) "nodegroup" not set`, []string{"rollback", "web"}},
		{c, exitNotFound, "no such revision 9: the entry records revisions 3, 2, 1", []string{"rollback", "web", "-g", "workers", "--to-revision", "9"}},
		{gone, exitFailed, "does not exist", []string{"rollback", "web", "-g", "workers"}},
		// list
		{c, exitOK, "", []string{"list", "-o", "json"}},
		{fresh, exitUsage, `unknown output format "xml"`, []string{"list", "-o", "xml"}},
		{fresh, exitFailed, "needs a current context", []string{"list"}},
		{gone, exitFailed, "does not exist", []string{"list"}},
		{c, exitDeadline, "--timeout", []string{"list", "--timeout", "1ns"}},
		// preview
		{c, exitOK, "", []string{"preview", "-g", "workers", "-o", "json"}},
		{fresh, exitUsage, `required flag(s) "nodegroup" not set`, []string{"preview"}},
		{gone, exitFailed, "does not exist", []string{"preview", "-g", "workers"}},
		// delete: usage wins over the confirmation and the context
		{fresh, exitUsage, `required flag(s) "nodegroup" not set`, []string{"delete", "web"}},
		{fresh, exitUsage, `required flag(s) "nodegroup" not set`, []string{"delete", "web", "-y"}},
		{fresh, exitUsage, "accepts 1 arg(s), received 0", []string{"delete"}},
		{fresh, exitUsage, `invalid NodeGroup ID "Bad_Group"`, []string{"delete", "web", "-g", "Bad_Group"}},
		{c, exitRefused, "pass --yes (-y)", []string{"delete", "web", "-g", "workers"}},
		{c, exitOK, "", []string{"delete", "web", "-g", "workers", "-y"}},
		{c, exitNotFound, "deployment workers/nope does not exist", []string{"delete", "nope", "-g", "workers", "-y"}},
		{c, exitOK, "", []string{"delete", "nope", "-g", "workers", "--ignore-not-found", "-y"}},
		{gone, exitFailed, "does not exist", []string{"delete", "web", "-g", "workers", "-y"}},
		{amb, exitUnknown, "outcome of the index write is unknown", []string{"delete", "web", "-g", "workers", "-y"}},
		// build, pull, push
		{c, exitOK, "", []string{"build", "-t", "hello:v1", buildDir}},
		{fresh, exitUsage, `required flag(s) "tag" not set`, []string{"build", buildDir}},
		{fresh, exitUsage, `platform "linux" must be OS/ARCH`, []string{"build", "-t", "x:v1", "--platform", "linux", buildDir}},
		{fresh, exitUsage, "is not a valid image reference", []string{"build", "-t", "Bad Tag", buildDir}},
		{c, exitFailed, "", []string{"build", "-t", "x:v1", filepath.Join(c.root, "no-context-dir")}},
		{c, exitOK, "", []string{"pull", remoteImage}},
		{c, exitFailed, "", []string{"pull", "127.0.0.1:1/none:v1"}},
		{fresh, exitUsage, "is not a valid image reference", []string{"pull", "Bad Ref"}},
		{fresh, exitUsage, "accepts 1 arg(s)", []string{"pull"}},
		{c, exitOK, "", []string{"push", "hello:v1"}},
		{c, exitFailed, "is not in the local image store", []string{"push", "registry.podmin.internal/apps/nothing:v1"}},
		{fresh, exitUsage, "mirror/ is reserved", []string{"push", "hello:v1", "mirror/pause:3.10"}},
		{fresh, exitUsage, "accepts between 1 and 2 arg(s)", []string{"push"}},
		// secret
		{c, exitOK, "", []string{"secret"}},
		{c, exitOK, "", []string{"secret", "list"}},
		{fresh, exitUsage, "system keys belong to no namespace or Pod", []string{"secret", "list", "--for", "web", "--system"}},
		{fresh, exitUsage, `unknown secrets provider "vault"`, []string{"secret", "list", "--provider", "vault"}},
		{fresh, exitUsage, "unknown shorthand flag", []string{"secret", "list", "-z"}},
		{c, exitOK, "", []string{"secret", "create", "other", "--for", "web", "--file", valueFile}},
		{c, exitFailed, "already exists", []string{"secret", "create", "other", "--for", "web", "--file", valueFile}},
		{fresh, exitUsage, "no Pod given: pass --for POD", []string{"secret", "create", "k", "--stdin"}},
		{fresh, exitUsage, "which belongs to no Pod: omit --for and --namespace", []string{"secret", "create", "k", "--for", "web", "--system", "--stdin"}},
		{fresh, exitUsage, "--stdin and --file cannot be combined", []string{"secret", "create", "k", "--for", "web", "--stdin", "--file", valueFile}},
		{c, exitOK, "", []string{"secret", "update", "other", "--for", "web", "--file", valueFile}},
		{c, exitNotFound, "secret not found", []string{"secret", "update", "absent", "--for", "web", "--file", valueFile}},
		{fresh, exitUsage, "no Pod given", []string{"secret", "update", "k", "--file", valueFile}},
		{c, exitRefused, "pass --yes (-y)", []string{"secret", "delete", "token", "--for", "web"}},
		{c, exitFailed, "has no delete/restore", []string{"secret", "delete", "token", "--for", "web", "-y"}},
		{fresh, exitUsage, "no Pod given", []string{"secret", "delete", "token", "-y"}},
		{c, exitFailed, "has no delete/restore", []string{"secret", "restore", "token", "--for", "web"}},
		{fresh, exitUsage, "no Pod given", []string{"secret", "restore", "token"}},
		{c, exitRefused, "pass --yes (-y)", []string{"secret", "destroy", "token", "--for", "web"}},
		{c, exitNotFound, "secret not found", []string{"secret", "destroy", "absent", "--for", "web", "-y"}},
		{fresh, exitUsage, `"a/b" is not a safe key`, []string{"secret", "destroy", "a/b", "--for", "web", "-y"}},
		{c, exitOK, "", []string{"secret", "destroy", "doomed", "--for", "web", "-y"}},
		// recipes
		{c, exitOK, "", []string{"recipes"}},
		{c, exitFailed, "there is no podmin.star.lock", []string{"recipes", "lock", c.root}},
		{c, exitOK, "", []string{"recipes", "lock", lockDir}},
		{fresh, exitUsage, "accepts at most 1 arg(s)", []string{"recipes", "lock", "a", "b"}},
		{c, exitRefused, "pass --yes (-y)", []string{"recipes", "add", "lib2", filepath.Join(lockDir, "lib"), "--dir", lockDir}},
		{c, exitOK, "", []string{"recipes", "add", "lib2", filepath.Join(lockDir, "lib"), "--dir", lockDir, "--dry-run"}},
		{c, exitUsage, `invalid repository name "a/b"`, []string{"recipes", "add", "a/b", filepath.Join(lockDir, "lib"), "--dir", lockDir, "-y"}},
		{c, exitFailed, "is already pinned", []string{"recipes", "add", "lib", filepath.Join(lockDir, "lib"), "--dir", lockDir, "-y"}},
		{fresh, exitUsage, "accepts 2 arg(s)", []string{"recipes", "add", "lib"}},
		{fresh, exitUsage, "is neither GIT@PIN nor a local directory", []string{"recipes", "add", "lib", filepath.Join(c.root, "absent")}},
		{c, exitOK, "", []string{"recipes", "update", "--dir", lockDir}},
		{c, exitRefused, "pass --yes (-y)", []string{"recipes", "update", "--dir", movedDir}},
		{c, exitFailed, "is not in", []string{"recipes", "update", "nope", "--dir", lockDir}},
		{fresh, exitUsage, "--to moves one repository", []string{"recipes", "update", "--to", "main"}},
		// version, help, completion
		{c, exitOK, "", []string{"version"}},
		{fresh, exitUsage, `unknown output format "xml"`, []string{"version", "-o", "xml"}},
		{c, exitOK, "", []string{"help", "deploy"}},
		{c, exitOK, "", []string{"help", "starlark"}},
		{fresh, exitUsage, `unknown help topic "frob"`, []string{"help", "frob"}},
		{fresh, exitOK, "", []string{"completion", "bash"}},
		{fresh, exitOK, "", []string{"completion", "zsh"}},
		{fresh, exitOK, "", []string{"completion", "fish"}},
		{fresh, exitOK, "", []string{"completion", "powershell"}},
		{fresh, exitUsage, "unknown flag: --no-such-flag", []string{"completion", "bash", "--no-such-flag"}},
		{fresh, exitUsage, "unknown flag: --no-such-flag", []string{"completion", "zsh", "--no-such-flag"}},
		{fresh, exitUsage, "unknown flag: --no-such-flag", []string{"completion", "fish", "--no-such-flag"}},
		{fresh, exitUsage, "unknown flag: --no-such-flag", []string{"completion", "powershell", "--no-such-flag"}},
		{fresh, exitUsage, `unknown shell "tcsh"`, []string{"completion", "tcsh"}},
		{fresh, exitUsage, "name the shell", []string{"completion"}},
		{fresh, exitUsage, `unknown command "nosuch"`, []string{"nosuch"}},
		// setup, teardown, destroy
		{c, exitOK, "published the cluster configuration", []string{"setup", "--nodegroup", "web,size=2", "-y"}},
		{fresh, exitUsage, `required flag(s) "nodegroup" not set`, []string{"setup", "-o", "json"}},
		{fresh, exitUsage, "unknown flag: --node-group", []string{"setup", "--node-group", "web", "-y"}},
		{fresh, exitUsage, `--nodegroup "Bad_Group"`, []string{"setup", "--nodegroup", "Bad_Group", "-y"}},
		{fresh, exitUsage, `"size" is not KEY=VALUE`, []string{"setup", "--nodegroup", "web,size", "-y"}},
		{c, exitUsage, "disk-size does not apply to the local provider", []string{"setup", "--nodegroup", "web,disk-size=100", "-y"}},
		{c, exitUsage, "the local provider has no VPC", []string{"setup", "--vpc-cidr", "10.0.0.0/16", "--nodegroup", "web", "-y"}},
		{fresh, exitUsage, `size "abc" is not valid`, []string{"setup", "--nodegroup", "web,size=abc", "-y"}},
		{fresh, exitUsage, "NodeGroup \"web\" is given twice", []string{"setup", "--nodegroup", "web", "--nodegroup", "web,size=2", "-y"}},
		{fresh, exitFailed, "needs a current context", []string{"setup", "--nodegroup", "web", "-y"}},
		{c, exitRefused, "pass --yes (-y) to podmin setup", []string{"setup", "--nodegroup", "web"}},
		{c, exitOK, "withdrew the cluster configuration", []string{"teardown", "-y"}},
		{fresh, exitUsage, `unknown command "demo" for "podmin teardown"`, []string{"teardown", "demo", "-y"}},
		{fresh, exitFailed, "needs a current context", []string{"teardown", "-y"}},
		{c, exitRefused, "pass --yes (-y) to podmin teardown", []string{"teardown"}},
		{unowned, exitRefused, `names cluster "second", not "found"`, []string{"teardown", "-y"}},
		{doomed, exitOK, "deleting bucket", []string{"destroy", "-y"}},
		{fresh, exitUsage, `unknown output format "xml"`, []string{"destroy", "-y", "-o", "xml"}},
		{doomed, exitFailed, "needs a current context", []string{"destroy", "-y"}}, // the destroy above removed it
		{c, exitRefused, "pass --yes (-y) to podmin destroy", []string{"destroy"}},
		{retagged, exitRefused, `does not carry the podmin:create-nonce this context recorded`, []string{"destroy", "-y"}},
		// run: the script's own outcome
		{c, exitOK, "", []string{"run", ok}},
		{c, exitOK, "1 destructive call(s)", []string{"run", "--dry-run", destructiveDryRun}},
		{c, exitUsage, "is a directory: pass a recipe file", []string{"run", c.root}},
		{c, exitUsage, "want an integer", []string{"run", script("n.star", "def main(ctx, n = 1):\n    pass\n"), "--", "--n=x"}},
		{c, exitUsage, `pass the script's arguments after "--"`, []string{"run", ok, "extra"}},
		{fresh, exitUsage, "requires at least 1 arg(s)", []string{"run"}},
		{c, exitNotFound, "no such file or directory", []string{"run", filepath.Join(c.root, "missing.star")}},
		{c, exitRefused, "not confirmed", []string{"run", unconfirmed}},
		{c, exitRefused, `confirm = "prod" does not match the cluster "demo"`, []string{"run", "-y", named}},
		{c, exitScript, "the recipe says no", []string{"run", failing}},
		{c, exitScript, "syntax.star:1:", []string{"run", script("syntax.star", "def (\n")}},
		{c, exitScript, `for parameter "nodegroup": got int, want string`, []string{"run", script("type.star", "podmin.deployments.list()\npodmin.deployments.deploy(\"web\", nodegroup = 1)\n")}},
		{c, exitDeadline, "did not finish within --timeout", []string{"run", "--timeout", "300ms", loop}},
		// run: a built-in's error keeps its command's status
		{c, exitNotFound, "deployment workers/absent does not exist", []string{"run", script("del.star", "podmin.deployments.delete(\"absent\", nodegroup = \"workers\", confirm = True)\n")}},
		{c, exitNotFound, "deployment workers/absent does not exist", []string{"run", script("get.star", "podmin.deployments.get(\"absent\", nodegroup = \"workers\")\n")}},
		{c, exitNotFound, `unknown context "nope"`, []string{"run", script("use.star", "podmin.contexts.use(\"nope\")\n")}},
		{c, exitNotFound, "secret not found", []string{"run", script("upd.star", "podmin.secrets.update(\"absent\", for_ = \"web\", value = \"some value\")\n")}},
		{c, exitNotFound, "secret not found", []string{"run", script("dst.star", "podmin.secrets.destroy(\"absent\", for_ = \"web\", confirm = True)\n")}},
		{c, exitNotFound, "no such file or directory", []string{"run", script("val.star", "podmin.manifests.validate(file = \"nothere.yaml\")\n")}},
		{gone, exitFailed, "does not exist", []string{"run", script("gone.star", "print(podmin.deployments.list())\n")}},
		{gone, exitFailed, "does not exist", []string{"run", script("gone2.star", "podmin.deployments.delete(\"web\", nodegroup = \"workers\", confirm = True)\n")}},
		{fresh, exitFailed, "no current context", []string{"run", script("ctx.star", "podmin.deployments.list()\n")}},
		{c, exitFailed, "is not in the local image store", []string{"run", script("push.star", "podmin.images.push(\"registry.podmin.internal/apps/nothing:v1\")\n")}},
		{c, exitUsage, "invalid NodeGroup ID", []string{"run", script("ng.star", "podmin.deployments.deploy(\"web\", nodegroup = \"Bad_Group\", image = \"hello:v1\")\n")}},
		{c, exitRefused, "is tagged podmin:cluster=theirs", []string{"run", script("foreign.star", "podmin.contexts.connect(\"new\", provider = \"local\", bucket = \""+filepath.Join(c.root, "foreign")+"\")\n")}},
		{amb, exitUnknown, "outcome of the index write is unknown", []string{"run", script("amb.star", "podmin.deployments.deploy(\"web\", nodegroup = \"workers\", image = \"hello:v1\")\n")}},
		{c, exitOK, "", []string{"run", script("inrecipe.star", "podmin.secrets.destroy(\"in-recipe\", for_ = \"web\", confirm = \"demo\")\n")}},
		// test
		{c, exitOK, "1 passed, 0 failed", []string{"test", tests}},
		{c, exitScript, "tests failed: 1 of 1", []string{"test", script("bad_test.star", "def test_bad(t):\n    t.assert.eq(1, 2)\n")}},
		{c, exitNotFound, "nothere does not exist", []string{"test", filepath.Join(c.root, "nothere")}},
		{c, exitNotFound, "no *_test.star files", []string{"test", buildDir}},
		{c, exitNotFound, `no test matches -run "nomatch"`, []string{"test", "-run", "nomatch", tests}},
		{fresh, exitUsage, "-run: error parsing regexp", []string{"test", "-run", "(", tests}},
		{fresh, exitUsage, "unknown flag -x", []string{"test", "-x", tests}},
		// repl
		{repl, exitOK, "", []string{"repl"}},
		{fresh, exitUsage, "accepts at most 1 arg(s)", []string{"repl", "a", "b"}},
		{repl, exitNotFound, "no such file or directory", []string{"repl", filepath.Join(c.root, "missing.star")}},
	}
	// install, uninstall (cloudflared) and fetch
	rows = append(rows, installExitRows(t, fresh, other)...)
	rows = append(rows, fetchExitRows(t, fresh, c)...)
	rows = append(rows, indexExitRows(t, fresh)...)
	rows = append(rows, statusExitRows(t, fresh, c)...)
	rows = append(rows, recipeExitRows(t, fresh, c)...)
	if len(rows) < 100 {
		t.Fatalf("%d rows, want at least 100", len(rows))
	}
	classes := map[string]map[int]bool{}
	builtinClasses := map[string]map[int]bool{}
	for _, r := range rows {
		t.Run(strings.Join(r.args, " "), func(t *testing.T) {
			r.cli.t = t
			out, errs, code := r.cli.run(r.args...)
			recipeClasses(builtinClasses, r, code, errs)
			if code != r.code || !strings.Contains(out+errs, r.want) {
				t.Errorf("exit %d, want %d with %q:\n%s%s", code, r.code, r.want, out, errs)
			}
			// A recipe's built-in without a command points to the
			// Starlark reference instead.
			if code == exitUsage && !strings.HasSuffix(errs, " --help\"\n") && !strings.HasSuffix(errs, "run \"podmin help starlark\"\n") {
				t.Errorf("a usage error without the --help hint:\n%s", errs)
			}
			// One spelling of the error prefix, whoever made the error.
			for _, line := range strings.Split(errs, "\n") {
				if strings.HasPrefix(strings.TrimSpace(line), "Error") {
					t.Errorf("an error line not spelled \"error\": %q", line)
				}
			}
		})
		root := newRoot(&builtins.Env{})
		if cmd, _, err := root.Find(r.args); err == nil {
			if classes[cmd.CommandPath()] == nil {
				classes[cmd.CommandPath()] = map[int]bool{}
			}
			classes[cmd.CommandPath()][r.code] = true
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
	var summary []string
	for _, cmd := range runnableCommands() {
		path := cmd.CommandPath()
		if strings.HasPrefix(path, "podmin __") {
			continue // the shell's completion requests
		}
		if len(classes[path]) == 0 {
			t.Errorf("%s has no row in the exit-code table", path)
		}
		var codes []string
		for code := range classes[path] {
			codes = append(codes, fmt.Sprint(code))
		}
		sort.Strings(codes)
		summary = append(summary, path+": "+strings.Join(codes, " "))
	}
	// Every command that can be called wrongly has a usage row.
	for _, cmd := range runnableCommands() {
		path := cmd.CommandPath()
		if !strings.HasPrefix(path, "podmin __") && !slices.Contains([]string{"podmin secret", "podmin recipes", "podmin install", "podmin uninstall"}, path) && !classes[path][exitUsage] {
			t.Errorf("%s has no usage row (exit 2)", path)
		}
	}
	t.Logf("%d rows; statuses per command:\n%s", len(rows), strings.Join(summary, "\n"))
	checkBuiltinRows(t, builtinClasses)
}

// TestSignalExitCodes interrupts a running podmin process with each signal
// it handles: the command is cancelled, says so, and exits 128 + the
// signal's number as shells report it (SIGQUIT included: no stack dump).
func TestSignalExitCodes(t *testing.T) {
	dir := t.TempDir()
	loop := filepath.Join(dir, "loop.star")
	if err := os.WriteFile(loop, []byte("def main(ctx):\n    print(\"started\")\n    while True:\n        pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
		name string
	}{
		{syscall.SIGINT, 130, "SIGINT"},
		{syscall.SIGTERM, 143, "SIGTERM"},
		{syscall.SIGHUP, 129, "SIGHUP"},
		{syscall.SIGQUIT, 131, "SIGQUIT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "run", loop)
			cmd.Env = append(xdgEnv(dir), "PODMIN_TEST_RUN_MAIN=1")
			out := &syncBuffer{more: make(chan struct{}, 1)}
			var errb syncBuffer
			cmd.Stdout, cmd.Stderr = out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			out.waitFor(t, "started")
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			var exit *exec.ExitError
			if err := waitExit(cmd, 20*time.Second); err != nil && !errors.As(err, &exit) {
				t.Fatal(err)
			}
			errb.mu.Lock()
			stderr := errb.buf.String()
			errb.mu.Unlock()
			if got := cmd.ProcessState.ExitCode(); got != tc.code || !strings.Contains(stderr, "interrupted by "+tc.name) {
				t.Errorf("exit %d, want %d with %q:\n%s", got, tc.code, "interrupted by "+tc.name, stderr)
			}
			if strings.Contains(stderr, "goroutine ") {
				t.Errorf("a stack dump:\n%s", stderr)
			}
		})
	}
}

// statusExitRows are status's rows of the exit-code table.
func statusExitRows(t *testing.T, fresh, c *cli) []exitRow {
	s := newCLI(t)
	s.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket")
	s.ok("setup", "--nodegroup", "workers", "-y") // nodes may start: waits wait
	s.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	// Setup never ran, no agent ever reported: nothing can run web.
	unset := newCLI(t)
	unset.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket")
	unset.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	failing := newCLI(t)
	failing.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket")
	failing.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	// The nodes keep reporting the error, so it is reported after each
	// wait begins.
	t.Cleanup(newFakeLeader(failing).keepFailing("kubelet"))
	return []exitRow{
		{c, exitOK, "", []string{"status"}},
		{s, exitOK, "", []string{"status", "web", "-g", "workers", "-o", "json"}},
		{failing, exitOK, "", []string{"status", "-g", "workers"}},
		{s, exitDeadline, "waiting for workers/web revision", []string{"status", "web", "-g", "workers", "--wait", "--timeout", "1s"}},
		{s, exitDeadline, "waiting for workers/web revision", []string{"deploy", "web", "-g", "workers", "--image", "hello:v1", "--wait=applied", "--timeout", "1s"}},
		{failing, exitFailed, "a node reports an error for the revision", []string{"status", "web", "-g", "workers", "--wait"}},
		{unset, exitFailed, "no node has ever reported", []string{"status", "web", "-g", "workers", "--wait"}},
		{unset, exitFailed, "no node has ever reported", []string{"deploy", "web", "-g", "workers", "--image", "hello:v2", "--wait"}},
		{unset, exitFailed, "no node has ever reported", []string{"run", unset.script("unset.star", "podmin.deployments.wait(\"web\", nodegroup = \"workers\")\n")}},
		{fresh, exitUsage, "a deployment name needs its NodeGroup", []string{"status", "web"}},
		{fresh, exitUsage, `unknown wait goal "soon"`, []string{"status", "-g", "workers", "--wait=soon"}},
		{fresh, exitUsage, `invalid NodeGroup ID "Bad_Group"`, []string{"status", "-g", "Bad_Group"}},
		{fresh, exitUsage, "accepts at most 1 arg(s)", []string{"status", "a", "b"}},
		{s, exitNotFound, "deployment workers/nope is not in the deployment index", []string{"status", "nope", "-g", "workers"}},
		// The same gates inside a recipe keep their commands' statuses.
		{s, exitDeadline, "waiting for workers/web revision", []string{"run", s.script("wait.star", "podmin.deployments.wait(\"web\", nodegroup = \"workers\", timeout = \"1s\")\n")}},
		{failing, exitFailed, "a node reports an error for the revision", []string{"run", failing.script("werr.star", "podmin.deployments.wait(\"web\", nodegroup = \"workers\")\n")}},
		{failing, exitFailed, "a node reports an error for the revision", []string{"run", failing.script("derr.star", "podmin.deployments.deploy(\"web\", nodegroup = \"workers\", image = \"hello:v1\", wait = \"ready\")\n")}},
	}
}
