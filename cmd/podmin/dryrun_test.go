// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/builtins/dryrun"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
	pstar "podmin.dev/podmin/starlark"
)

// bucketObjects reads every object of a local bucket.
func bucketObjects(t *testing.T, bucket string) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	b := local.Open(bucket)
	infos, err := objstore.ListAll(ctx, b, "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, in := range infos {
		obj, err := b.Get(ctx, in.Key, objstore.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[in.Key] = obj.Data
	}
	return out
}

// changedObjects are the keys whose bytes differ between two readings.
func changedObjects(before, after map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range after {
		if old, ok := before[k]; !ok || !bytes.Equal(old, v) {
			out[k] = v
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out[k] = nil
		}
	}
	return out
}

// deploy --dry-run plans exactly the writes the real deploy that follows
// makes: the same object keys, the same actions, the same bytes. The index
// write's clock and write ID are fixed, so even the revision it records is
// the same.
func TestDeployDryRunPlanEqualsTheRealDeploy(t *testing.T) {
	c := newCLI(t)
	bucket := c.connectLocal()
	var captured builtins.Env
	c.adjust = func(e *builtins.Env) {
		e.Commit.Now = func() time.Time { return time.Date(2026, 12, 7, 17, 0, 0, 0, time.UTC) }
		e.Commit.NewWriteID = func() string { return "00000000000000d1" }
		captured = *e
	}
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1", "--service")
	args := []string{"deploy", "web", "-g", "workers", "--image", "hello:v2", "--service", "--port", "80:8080"}

	before := bucketObjects(t, bucket)
	out := c.ok(append(args, "--dry-run", "-o", "json")...)
	if after := bucketObjects(t, bucket); len(changedObjects(before, after)) != 0 {
		t.Fatalf("the dry run wrote %q", slices.Sorted(maps.Keys(changedObjects(before, after))))
	}
	var plan struct {
		DryRun bool
		Steps  []pstar.Step
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || !plan.DryRun || len(plan.Steps) != 1 || plan.Steps[0].Call != `podmin.deployments.deploy("web")` {
		t.Fatalf("plan %v:\n%s", err, out)
	}
	// --wait is planned, not performed: no node runs here, yet it returns.
	text := c.ok(append(args, "--dry-run", "--wait")...)
	if !strings.Contains(text, "nothing was written") || !strings.Contains(text, "updated   object deployments/index.json") {
		t.Errorf("the text plan:\n%s", text)
	}
	// The bytes: the command's operation over the same recording
	// boundaries, in the environment the command ran in.
	rec, err := pstar.DryRunCommand(context.Background(), &captured, "deploy", "web", func(ctx context.Context, ops *builtins.Env) error {
		o := builtins.DeployOptions{}
		o.Name, o.NodeGroup, o.Images, o.Service, o.Ports = "web", "workers", []string{"hello:v2"}, true, []string{"80:8080"}
		_, err := ops.Deploy(ctx, o)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	c.ok(args...)
	real := changedObjects(before, bucketObjects(t, bucket))
	if len(real) == 0 {
		t.Fatal("the real deploy changed nothing: this proves nothing")
	}
	planned := map[string]string{}
	for _, ch := range plan.Steps[0].Changes {
		if ch.Kind != dryrun.KindObject {
			t.Errorf("planned a %s change %s outside the bucket", ch.Kind, ch.Target)
			continue
		}
		planned[ch.Target] = ch.Action
	}
	if !slices.Equal(slices.Sorted(maps.Keys(planned)), slices.Sorted(maps.Keys(real))) {
		t.Fatalf("planned %q, the real deploy wrote %q", slices.Sorted(maps.Keys(planned)), slices.Sorted(maps.Keys(real)))
	}
	for k := range real {
		action := planned[k]
		if _, existed := before[k]; existed != (action == dryrun.Updated) {
			t.Errorf("%s planned as %s", k, action)
		}
	}
	recorded := map[string][]byte{}
	for _, ch := range rec.Changes {
		recorded[ch.Target] = ch.After
	}
	for k, want := range real {
		if !bytes.Equal(recorded[k], want) {
			t.Errorf("%s: the dry run recorded\n%s\nthe real deploy wrote\n%s", k, recorded[k], want)
		}
	}
}

// delete, index rebuild, install and uninstall cloudflared take --dry-run:
// each prints the plan of the writes its real run makes, asks for no
// confirmation, and writes nothing.
func TestDryRunOfTheOtherWritingCommands(t *testing.T) {
	c, _ := installCLI(t)
	bucket := filepath.Join(c.root, "bucket")
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	plans := []struct {
		args []string
		want []string
	}{
		{[]string{"delete", "web", "-g", "workers"}, []string{`podmin.deployments.delete("web")  [destructive]`, "updated   object deployments/index.json", `- workers/web.pod: "nodegroups/workers/pods/sha512/`}},
		{[]string{"install", "cloudflared", "-g", "edge"}, []string{"podmin.install.cloudflared()", "created   object nodegroups/edge/pods/sha512/", "updated   object deployments/index.json"}},
		{[]string{"uninstall", "cloudflared", "-g", "edge"}, []string{"podmin.uninstall.cloudflared()  [destructive]", "unchanged"}},
	}
	for _, p := range plans {
		before := bucketObjects(t, bucket)
		out := c.ok(append(p.args, "--dry-run")...)
		for _, w := range p.want {
			if !strings.Contains(out, w) {
				t.Errorf("podmin %s --dry-run lacks %q:\n%s", strings.Join(p.args, " "), w, out)
			}
		}
		js := c.ok(append(p.args, "--dry-run", "-o", "json")...)
		if !json.Valid([]byte(js)) || !strings.Contains(js, `"dryRun": true`) {
			t.Errorf("podmin %s --dry-run -o json:\n%s", strings.Join(p.args, " "), js)
		}
		if d := changedObjects(before, bucketObjects(t, bucket)); len(d) != 0 {
			t.Errorf("podmin %s --dry-run wrote %q", strings.Join(p.args, " "), slices.Sorted(maps.Keys(d)))
		}
	}
	c.fails(exitNotFound, "deployment workers/nope does not exist", "delete", "nope", "-g", "workers", "--dry-run")

	// A corrupt index: the rebuild's plan shows on standard error, the
	// write it would make on standard output, and the index stays corrupt.
	valid, err := os.ReadFile(filepath.Join(bucket, "deployments", "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	corrupted := corruptIndex(t, bucket, valid, "workers/web")
	out, errs, code := c.run("index", "rebuild", "--dry-run")
	if code != 0 || !strings.Contains(errs, "  workers/web\n") || !strings.Contains(out, "podmin.index.rebuild()  [destructive]") || !strings.Contains(out, "updated   object deployments/index.json") {
		t.Fatalf("index rebuild --dry-run: exit %d\n%s%s", code, out, errs)
	}
	if got, _ := os.ReadFile(filepath.Join(bucket, "deployments", "index.json")); !bytes.Equal(got, corrupted) {
		t.Fatal("index rebuild --dry-run wrote the index")
	}
}
