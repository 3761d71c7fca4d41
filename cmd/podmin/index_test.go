// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/state"
)

// corruptIndex rewrites the index of a local bucket, whose valid form was
// valid, so that it no longer decodes: the entries of keep stay readable,
// then the object breaks off.
func corruptIndex(t *testing.T, bucket string, valid []byte, keep ...string) []byte {
	t.Helper()
	p := filepath.Join(bucket, "deployments", "index.json")
	ix, err := state.DecodeIndex(valid)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("{\n")
	for _, k := range keep {
		key, _ := state.ParseKey(k)
		e, ok := ix.Lookup(key)
		if !ok {
			t.Fatalf("no entry %s to keep", k)
		}
		fmt.Fprintf(&b, "  %q: {\"pod\": %q", k, e.Pod)
		if e.Service != "" {
			fmt.Fprintf(&b, ", \"service\": %q", e.Service)
		}
		b.WriteString("},\n")
	}
	b.WriteString("  \"workers/broken\": {\"pod\": 17}\n<<<< truncated")
	data := []byte(b.String())
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

// indexGoldenSteps corrupts the index of the golden cluster (web deployed,
// api deployed with a Service and deleted again) and rebuilds it, leaving
// the deleted api out: the index is as it was before.
func indexGoldenSteps(t *testing.T, bucket string) []goldenStep {
	valid, err := os.ReadFile(filepath.Join(bucket, "deployments", "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	corruptIndex(t, bucket, valid, "workers/web")
	return []goldenStep{
		{"index-rebuild", []string{"index", "rebuild", "--pick", "workers/api=none", "-y"}},
	}
}

// TestIndexRebuild covers the command and its built-in: a valid index is
// refused; without confirmation the plan is shown and nothing written;
// ambiguous payloads are refused with the picks that settle them; a dry
// run records the write; a confirmed rebuild writes the index back.
func TestIndexRebuild(t *testing.T) {
	c := newCLI(t)
	bucket := c.connectLocal()
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1", "--service")
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v2", "--service")
	c.ok("deploy", "api", "-g", "workers", "--image", "api:v1")
	c.ok("deploy", "old", "-g", "edge", "--image", "old:v1")
	c.ok("delete", "old", "-g", "edge", "-y")
	index := filepath.Join(bucket, "deployments", "index.json")
	valid, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	c.fails(exitFailed, "rebuild only replaces an index that does not decode", "index", "rebuild", "-y")

	// web readable, api not: the plan keeps web, restores api as the view
	// of workers lists it, and leaves the deleted old out: the view of
	// edge, written after its only payload, does not list it.
	corrupted := corruptIndex(t, bucket, valid, "workers/web")
	c.fails(exitFailed, "invalid deployments index", "list")
	out, errs, code := c.run("index", "rebuild")
	if code != exitRefused || !strings.Contains(errs, "pass --yes (-y)") {
		t.Fatalf("rebuild without -y: exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"  workers/web\n", "(readable entry, kept)", "+ workers/api\n", "(as the newest view of its NodeGroup lists it)", "- edge/old\n", "(deleted: the NodeGroup view deployments/nodegroups/edge.json", "- workers/broken\n", "images registry.podmin.internal/apps/api:v1"} {
		if !strings.Contains(errs, want) {
			t.Errorf("plan lacks %q:\n%s", want, errs)
		}
	}
	if got, _ := os.ReadFile(index); string(got) != string(corrupted) {
		t.Fatal("an unconfirmed rebuild wrote the index")
	}

	// Both versions of web are candidates once its entry is unreadable
	// and no view of workers tells which is current.
	corrupted = corruptIndex(t, bucket, valid)
	if err := local.Open(bucket).Delete(t.Context(), "deployments/nodegroups/workers.json", ""); err != nil {
		t.Fatal(err)
	}
	_, errs, code = c.run("index", "rebuild", "-y")
	if code != exitFailed || !strings.Contains(errs, "--pick workers/web=") || !strings.Contains(errs, "apps/hello:v1") || !strings.Contains(errs, "apps/hello:v2") ||
		!strings.Contains(errs, "no NodeGroup view of workers can tell") {
		t.Fatalf("ambiguous rebuild: exit %d\n%s", code, errs)
	}
	if got, _ := os.ReadFile(index); string(got) != string(corrupted) {
		t.Fatal("an ambiguous rebuild wrote the index")
	}
	validIx, err := state.DecodeIndex(valid)
	if err != nil {
		t.Fatal(err)
	}
	web, _ := validIx.Lookup(state.Key{NodeGroup: "workers", Name: "web"})
	api, _ := validIx.Lookup(state.Key{NodeGroup: "workers", Name: "api"})
	digest := func(p string) string { return strings.TrimSuffix(p[strings.LastIndex(p, "/")+1:], ".yaml")[:12] }
	picks := []string{"workers/web=" + digest(web.Pod), "service:default/web=" + digest(web.Service), "workers/api=" + digest(api.Pod), "edge/old=none"}

	// The built-in: a dry run shows the plan and records the write.
	recipe := c.script("rebuild.star", fmt.Sprintf("def main(ctx):\n    r = podmin.index.rebuild(pick = [%q, %q, %q, %q], confirm = True)\n    print(len(r.entries), r.written, r.planned)\n", picks[0], picks[1], picks[2], picks[3]))
	out, errs, code = c.run("run", "--dry-run", recipe)
	if code != 0 || !strings.Contains(out, "2 True True") || !strings.Contains(out, "object deployments/index.json") || !strings.Contains(errs, "+ workers/web") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errs)
	}
	if got, _ := os.ReadFile(index); string(got) != string(corrupted) {
		t.Fatal("a dry run wrote the index")
	}
	unconfirmed := c.script("unconfirmed.star", "def main(ctx):\n    podmin.index.rebuild()\n")
	c.fails(exitRefused, "podmin.index.rebuild is destructive", "run", unconfirmed)

	args := []string{"index", "rebuild", "-y"}
	for _, p := range picks {
		args = append(args, "--pick", p)
	}
	if out := c.ok(args...); !strings.Contains(out, "rebuilt with 2 entries") {
		t.Fatalf("rebuild:\n%s", out)
	}
	c.ok("list")
	got, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	// The entries were picked from the payloads: the revisions the
	// unreadable entries recorded cannot come back, the desired state does.
	rebuilt, err := state.DecodeIndex(got)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rebuilt.Items(), validIx.Items()) {
		t.Errorf("rebuilt index\n%s\nwant the entries of the index before the damage\n%s", got, valid)
	}
}

// indexExitRows are the exit-code contract's rows for "podmin index
// rebuild": a rebuilt corrupt index, a valid index refused, bad usage
// before any access, and a rebuild that was not confirmed.
func indexExitRows(t *testing.T, fresh *cli) []exitRow {
	broken := newCLI(t)
	bucket := broken.connectLocal()
	broken.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	valid, err := os.ReadFile(filepath.Join(bucket, "deployments", "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	corruptIndex(t, bucket, valid, "workers/web")
	unconfirmed := newCLI(t)
	other := unconfirmed.connectLocal()
	unconfirmed.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	corruptIndex(t, other, valid, "workers/web")
	healthy := newCLI(t)
	healthy.connectLocal()
	healthy.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	return []exitRow{
		{unconfirmed, exitRefused, "pass --yes (-y)", []string{"index", "rebuild"}},
		{broken, exitOK, "", []string{"index", "rebuild", "-y"}},
		{healthy, exitFailed, "rebuild only replaces an index that does not decode", []string{"index", "rebuild", "-y"}},
		{fresh, exitFailed, "needs a current context", []string{"index", "rebuild", "-y"}},
		{fresh, exitUsage, `unknown output format "xml"`, []string{"index", "rebuild", "-o", "xml"}},
		{fresh, exitUsage, "--pick", []string{"index", "rebuild", "--pick", "nonsense", "-y"}},
		{fresh, exitUsage, "unknown flag: --force", []string{"index", "rebuild", "--force"}},
	}
}
