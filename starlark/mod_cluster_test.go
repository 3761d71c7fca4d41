// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"errors"
	"maps"
	"os"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins"
)

func TestClusterSetupAndDestroyFromAScript(t *testing.T) {
	e := newEnv(t)
	_, err := e.run(Options{}, `
s = podmin.cluster.setup(nodegroup = ["default", "workers,size=2"], confirm = True)
print(s.cluster, s.nodegroups, s.applied, [x.action for x in s.secrets], s.config_changed, len(s.local_agents))
print(podmin.cluster.setup(nodegroup = "default", confirm = "test").secrets[0].action)
`)
	if err != nil {
		t.Fatal(err)
	}
	if want := "test [\"default\", \"workers\"] True [\"created\", \"created\"] True 3\nkept\n"; e.stdout.String() != want {
		t.Fatalf("stdout %q, want %q", e.stdout.String(), want)
	}

	// The guard: no confirm, a wrong cluster.
	for script, want := range map[string]string{
		`podmin.cluster.destroy()`:                                         "podmin.cluster.destroy is destructive: pass confirm = \"test\" (the cluster) or confirm = True",
		`podmin.cluster.teardown(confirm = "prod")`:                        `confirm = "prod" does not match the cluster "test"`,
		`podmin.cluster.setup(nodegroup = "Bad", confirm = True)`:          `nodegroup = "Bad": invalid NodeGroup ID "Bad"`,
		`podmin.cluster.setup(nodegroup = "a", nat64 = 3, confirm = True)`: `for parameter "nat64": got int, want bool or str`,
	} {
		_, err := e.run(Options{}, script+"\n")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", script, err, want)
		}
		if strings.Contains(script, "destroy") && !errors.Is(err, builtins.ErrNotConfirmed) {
			t.Errorf("%s: %v is not ErrNotConfirmed", script, err)
		}
	}

	// A dry run of destroy reads for real and writes nothing.
	script := e.write("main.star", `
d = podmin.cluster.destroy(confirm = True)
print(d.bucket_deleted, d.context_removed, d.planned)
`)
	before := snapshot(t, e.dir)
	e.stdout.Reset()
	h := e.host(Options{DryRun: true})
	if err := h.Run(context.Background(), script, nil); err != nil {
		t.Fatal(err)
	}
	_ = h.Close()
	if after := snapshot(t, e.dir); !maps.Equal(before, after) {
		for k := range after {
			if before[k] != after[k] {
				t.Errorf("changed: %s", k)
			}
		}
		t.Fatal("a dry run of destroy changed the state")
	}
	if e.stdout.String() != "True True True\n" {
		t.Fatalf("dry run stdout %q", e.stdout.String())
	}
	var plan strings.Builder
	if err := h.Plan().Write(&plan, "table"); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"workload-ca-key", "cluster-ca", "tfstate/podmin.auto.tfvars.json", "contexts.json"} {
		if !strings.Contains(plan.String(), w) {
			t.Errorf("dry-run plan lacks %q:\n%s", w, plan.String())
		}
	}

	// The real destroy.
	e.stdout.Reset()
	if _, err := e.run(Options{}, `print(podmin.cluster.destroy(confirm = "test").context_removed)`+"\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.ops.Dirs.Data); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ops.CurrentContext(); err == nil {
		t.Error("the context remains after destroy")
	}
}

func TestClusterSetupDryRunOnLocal(t *testing.T) {
	e := newEnv(t)
	script := e.write("main.star", `
s = podmin.cluster.setup(nodegroup = ["default,size=2"], confirm = True)
print(s.planned, [x.action for x in s.secrets], s.config_changed, len(s.local_agents))
`)
	before := snapshot(t, e.dir)
	h := e.host(Options{DryRun: true})
	if err := h.Run(context.Background(), script, nil); err != nil {
		t.Fatal(err)
	}
	_ = h.Close()
	if after := snapshot(t, e.dir); !maps.Equal(before, after) {
		t.Fatal("a dry run of setup changed the state")
	}
	if e.stdout.String() != "True [\"created\", \"created\"] True 2\n" {
		t.Fatalf("stdout %q", e.stdout.String())
	}
	var calls []string
	for _, st := range h.Plan().Steps() {
		for _, c := range st.Changes {
			calls = append(calls, st.Call+": "+c.Action+" "+c.Kind+" "+c.Target)
		}
	}
	got := strings.Join(calls, "\n")
	for _, want := range []string{
		"podmin.cluster.setup(): created secret /test/_system/workload-ca-key",
		"podmin.cluster.setup(): created secret /test/_system/cluster-ca",
		"podmin.cluster.setup(): created object tfstate/podmin.auto.tfvars.json",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("plan lacks %q:\n%s", want, got)
		}
	}
}
