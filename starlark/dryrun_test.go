// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/builtins"
)

// snapshot maps every file and directory below dir to its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[p+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const dryRunScript = `
def main(ctx):
    before = [e.name for e in podmin.deployments.list()]
    print("before:", before)
    if "old" in before:
        podmin.deployments.delete("old", nodegroup = "workers", confirm = True)
    d = podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v1", service = True)
    print("deploy:", d.action, d.planned)
    print("service:", d.service_path != "")
    print("get:", podmin.deployments.get("web", nodegroup = "workers").service)
    print("old gone:", podmin.deployments.get("old", nodegroup = "workers", default = None))
    m = podmin.manifests.init("api", nodegroup = "edge", image = "api:v1")
    print("validate:", podmin.manifests.validate(file = m.file).name)
    print("same again:", podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v1", service = True).action)
    podmin.contexts.connect("other", provider = "local", bucket = "other")
    print("now:", podmin.contexts.current().cluster, [e.name for e in podmin.deployments.list()])
`

func TestDryRunRecordsWritesAndChangesNothing(t *testing.T) {
	e := newEnv(t)
	if _, err := e.ops.Deploy(context.Background(), builtins.DeployOptions{ManifestOptions: builtins.ManifestOptions{Name: "old", NodeGroup: "workers", Images: []string{"old:v1"}}}); err != nil {
		t.Fatal(err)
	}
	script := e.write("main.star", dryRunScript)
	before := snapshot(t, e.dir)

	h := e.host(Options{DryRun: true})
	if err := h.Run(context.Background(), script, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, e.dir); !maps.Equal(before, after) {
		for k := range after {
			if before[k] != after[k] {
				t.Errorf("changed: %s", k)
			}
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				t.Errorf("removed: %s", k)
			}
		}
		t.Fatal("a dry run changed the state")
	}
	wantOut := `before: ["old"]
deploy: created True
service: True
get: default/web
old gone: None
validate: api
same again: unchanged
now: other []
`
	if e.stdout.String() != wantOut {
		t.Fatalf("stdout:\n%s\nwant:\n%s", e.stdout.String(), wantOut)
	}
	var calls []string
	for _, st := range h.Plan().Steps() {
		var cs []string
		for _, c := range st.Changes {
			cs = append(cs, c.Action+" "+c.Kind+" "+c.Target)
		}
		calls = append(calls, st.Call+": "+strings.Join(cs, "; "))
	}
	got := strings.Join(calls, "\n")
	for _, want := range []string{
		`podmin.deployments.delete("old"): updated object deployments/index.json`,
		`podmin.deployments.deploy("web"): created object nodegroups/workers/pods/sha512/`,
		`podmin.manifests.init("api"): created file ` + filepath.Join(e.ops.WorkDir, "daemonset.yaml"),
		`podmin.deployments.deploy("web"): ` + "\n",
		`podmin.contexts.connect("other"): created bucket other; updated bucket-tags other; updated contexts contexts.json`,
	} {
		if !strings.Contains(got+"\n", want) {
			t.Errorf("plan lacks %q:\n%s", want, got)
		}
	}
	var table, js strings.Builder
	if err := h.Plan().Write(&table, "table"); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"nothing was written", "~ current: \"test\" -> \"other\"", "+kind: DaemonSet", "  unchanged\n"} {
		if !strings.Contains(table.String(), w) {
			t.Errorf("plan lacks %q:\n%s", w, table.String())
		}
	}
	if err := h.Plan().Write(&js, "json"); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		DryRun bool
		Steps  []Step
	}
	if err := json.Unmarshal([]byte(js.String()), &doc); err != nil || !doc.DryRun || len(doc.Steps) != 5 || doc.Steps[0].Call != `podmin.deployments.delete("old")` {
		t.Fatalf("json plan %v: %s", err, js.String())
	}
}

func TestDryRunFailsLikeTheRealThing(t *testing.T) {
	e := newEnv(t)
	for script, want := range map[string]string{
		`podmin.deployments.delete("nope", nodegroup = "workers", confirm = True)`: "deployment workers/nope does not exist",
		`podmin.deployments.deploy("web", nodegroup = "Bad", image = "x:1")`:       "argument nodegroup: invalid NodeGroup ID",
		`podmin.contexts.use("nope")`:                                              `unknown context "nope"`,
		`podmin.deployments.deploy("web", nodegroup = "w")`:                        "deploy needs image =",
	} {
		h := e.host(Options{DryRun: true})
		err := h.Run(context.Background(), e.write("bad.star", script+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", script, err, want)
		}
	}
}

// TestDryRunScratchIsRemoved checks that the dry run's scratch copy of the
// local image store is gone after a failed and after an interrupted run.
func TestDryRunScratchIsRemoved(t *testing.T) {
	e := newEnv(t)
	seedImage(t, e)
	for name, script := range map[string]string{
		"error":     "podmin.images.push(\"hello:v1\")\nfail(\"boom\")\n",
		"interrupt": "podmin.images.push(\"hello:v1\")\nwhile True:\n    pass\n",
	} {
		t.Run(name, func(t *testing.T) {
			h := e.host(Options{DryRun: true})
			scratch := h.rec.ScratchDir()
			if _, err := os.Stat(filepath.Join(scratch, "images")); err != nil {
				t.Fatalf("no scratch image store: %v", err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			if name == "interrupt" {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			defer cancel()
			if err := h.Run(ctx, e.write(name+".star", script), nil); err == nil {
				t.Fatal("the run did not fail")
			}
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(scratch); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("scratch %s remains: %v", scratch, err)
			}
		})
	}
}
