// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// threeClusters connects one, two and home (current, last) and returns
// their buckets by name.
func threeClusters(c *cli) map[string]string {
	c.t.Helper()
	buckets := map[string]string{}
	for _, name := range []string{"one", "two", "home"} {
		buckets[name] = filepath.Join(c.root, "bucket-"+name)
		c.ok("connect", name, "--provider", "local", "--bucket", buckets[name])
	}
	return buckets
}

func (c *cli) contextsFile() string {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.root, "config", "podmin", "contexts.json"))
	if err != nil {
		c.t.Fatal(err)
	}
	return string(b)
}

func indexNames(c *cli, bucket string) []string {
	var names []string
	for _, e := range c.index(bucket).Items() {
		names = append(names, e.Key.Name)
	}
	sort.Strings(names)
	return names
}

// Two shells, each with its own PODMIN_CONTEXT (and one command with
// --context over it), deploy at the same time: every deployment lands in
// the cluster its shell selected, and the machine-wide current context
// and the contexts file stay exactly as they were.
func TestTwoShellsDeployToTheirOwnClusters(t *testing.T) {
	c := newCLI(t)
	buckets := threeClusters(c)
	before := c.contextsFile()
	type proc struct{ name, shellContext, flag string }
	var procs []proc
	for i := 0; i < 3; i++ {
		procs = append(procs, proc{fmt.Sprintf("one-%d", i), "one", ""}, proc{fmt.Sprintf("two-%d", i), "two", ""})
	}
	procs = append(procs, proc{"flag-two", "one", "two"}) // --context beats PODMIN_CONTEXT
	var wg sync.WaitGroup
	errs := make([]error, len(procs))
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := []string{"deploy", p.name, "-g", "workers", "--image", "app:v1"}
			if p.flag != "" {
				args = append(args, "--context", p.flag)
			}
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(os.Environ(), "PODMIN_TEST_RUN_MAIN=1", "PODMIN_CONTEXT="+p.shellContext)
			for k, v := range c.env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("podmin %s (PODMIN_CONTEXT=%s): %v\n%s", strings.Join(args, " "), p.shellContext, err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, want := strings.Join(indexNames(c, buckets["one"]), " "), "one-0 one-1 one-2"; got != want {
		t.Errorf("cluster one holds %q, want %q", got, want)
	}
	if got, want := strings.Join(indexNames(c, buckets["two"]), " "), "flag-two two-0 two-1 two-2"; got != want {
		t.Errorf("cluster two holds %q, want %q", got, want)
	}
	if got := indexNames(c, buckets["home"]); len(got) != 0 {
		t.Errorf("the current cluster home received %q", got)
	}
	if after := c.contextsFile(); after != before {
		t.Errorf("the contexts file changed:\nbefore %s\nafter %s", before, after)
	}
}

// The same in one process: two invocations with different environments
// run at once and keep their selections apart.
func TestTwoEnvironmentsInProcess(t *testing.T) {
	a := newCLI(t)
	buckets := threeClusters(a)
	b := &cli{t: t, root: a.root, env: map[string]string{}}
	for k, v := range a.env {
		b.env[k] = v
	}
	a.env["PODMIN_CONTEXT"], b.env["PODMIN_CONTEXT"] = "one", "two"
	before := a.contextsFile()
	var wg sync.WaitGroup
	codes := make([]string, 2)
	for i, c := range []*cli{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 3; j++ {
				name := fmt.Sprintf("%s-%d", c.env["PODMIN_CONTEXT"], j)
				if out, errs, code := c.run("deploy", name, "-g", "workers", "--image", "app:v1"); code != 0 {
					codes[i] = fmt.Sprintf("deploy %s: exit %d\n%s%s", name, code, out, errs)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, s := range codes {
		if s != "" {
			t.Fatal(s)
		}
	}
	for _, name := range []string{"one", "two"} {
		want := fmt.Sprintf("%s-0 %[1]s-1 %[1]s-2", name)
		if got := strings.Join(indexNames(a, buckets[name]), " "); got != want {
			t.Errorf("cluster %s holds %q, want %q", name, got, want)
		}
	}
	if a.contextsFile() != before {
		t.Error("the contexts file changed")
	}
	// use shows which context is in effect and why.
	if out := a.ok("use"); !strings.Contains(out, "in effect: one (selected by PODMIN_CONTEXT in this shell, over the current context)") {
		t.Errorf("use with PODMIN_CONTEXT=one:\n%s", out)
	}
	if out := a.ok("use", "--context", "two"); !strings.Contains(out, "in effect: two (selected by --context)") {
		t.Errorf("use --context two:\n%s", out)
	}
	delete(a.env, "PODMIN_CONTEXT")
	if out := a.ok("use"); !strings.Contains(out, "in effect: home (the current context)") {
		t.Errorf("use without a selection:\n%s", out)
	}
}

func TestContextFlagRefusals(t *testing.T) {
	c := newCLI(t)
	threeClusters(c)
	before := c.snapshot()
	c.fails(exitUsage, `unknown context "nope" (selected by --context)`, "list", "--context", "nope")
	c.env["PODMIN_CONTEXT"] = "nope"
	c.fails(exitUsage, "selected by PODMIN_CONTEXT", "list")
	delete(c.env, "PODMIN_CONTEXT")
	c.fails(exitUsage, "uses no cluster, so --context has no meaning", "version", "--context", "one")
	c.fails(exitUsage, "leave --context out", "use", "one", "--context", "two")
	c.unchanged(before)
	// use CLUSTER in a shell whose PODMIN_CONTEXT names another says so.
	c.env["PODMIN_CONTEXT"] = "two"
	_, errs, code := c.run("use", "one")
	if code != 0 || !strings.Contains(errs, "PODMIN_CONTEXT=two selects two in this shell") {
		t.Fatalf("use one with PODMIN_CONTEXT=two: exit %d\n%s", code, errs)
	}
}

// A recipe's contexts.use lasts for its run; persist = True makes it the
// current context; podmin run --context selects the run's first cluster.
func TestRecipeContextSelection(t *testing.T) {
	c := newCLI(t)
	buckets := threeClusters(c)
	recipe := filepath.Join(c.root, "r.star")
	if err := os.WriteFile(recipe, []byte(`
def main(ctx, second = "", persist = False):
    print("start", ctx.context.cluster)
    podmin.deployments.deploy("first", nodegroup = "workers", image = "app:v1")
    if second:
        podmin.contexts.use(second, persist = persist)
        podmin.deployments.deploy("second", nodegroup = "workers", image = "app:v1")
    for e in podmin.contexts.list():
        if e.in_effect:
            print("in effect", e.cluster, e.selected_by)
`), 0o644); err != nil {
		t.Fatal(err)
	}
	before := c.contextsFile()
	out := c.ok("run", "--context", "one", recipe, "--", "--second=two")
	if !strings.Contains(out, "start one") || !strings.Contains(out, "in effect two the recipe") {
		t.Fatalf("run output:\n%s", out)
	}
	if got := strings.Join(indexNames(c, buckets["one"]), " "); got != "first" {
		t.Errorf("cluster one holds %q, want first", got)
	}
	if got := strings.Join(indexNames(c, buckets["two"]), " "); got != "second" {
		t.Errorf("cluster two holds %q, want second", got)
	}
	if c.contextsFile() != before {
		t.Fatal("a run's contexts.use without persist changed the contexts file")
	}
	c.ok("run", recipe, "--", "--second=one", "--persist=true")
	if !strings.Contains(c.ok("use"), "in effect: one (the current context)") {
		t.Fatalf("persist = True did not make one current:\n%s", c.ok("use"))
	}
	// The first deploy went to the current context home.
	if got := strings.Join(indexNames(c, buckets["home"]), " "); got != "first" {
		t.Errorf("cluster home holds %q, want first", got)
	}
}
