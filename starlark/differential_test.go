// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"maps"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"podmin.dev/podmin/builtins/dryrun"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/oci"
	ociremote "podmin.dev/podmin/internal/oci/remote"
	"podmin.dev/podmin/internal/secrets"
	localsecrets "podmin.dev/podmin/internal/secrets/local"
	"podmin.dev/podmin/internal/state"
)

// world is everything a run can change, read through the same boundaries
// the operations write through: objects of every local bucket, bucket
// existence, secrets (names and values), the contexts file, local files
// and the local image store's indexes.
type world map[string]string

func (e *env) world() world {
	e.t.Helper()
	ctx := context.Background()
	w := world{}
	buckets := map[string]string{filepath.Join(e.dir, "bucket"): filepath.Join(e.dir, "bucket")}
	named, _ := os.ReadDir(filepath.Join(e.ops.Dirs.Data, "buckets"))
	for _, d := range named {
		buckets[d.Name()] = filepath.Join(e.ops.Dirs.Data, "buckets", d.Name())
	}
	for name, dir := range buckets {
		where := "bucket " + name + " (local)"
		b := local.Open(dir)
		if ok, err := b.BucketExists(ctx); err != nil || !ok {
			continue
		}
		w[dryrun.KindBucket+"|provider local|"+name] = "exists"
		all, err := objstore.ListAll(ctx, b, "")
		if err != nil {
			e.t.Fatal(err)
		}
		for _, o := range all {
			obj, err := b.Get(ctx, o.Key, objstore.GetOptions{})
			if err != nil {
				e.t.Fatal(err)
			}
			w[dryrun.KindObject+"|"+where+"|"+o.Key] = string(obj.Data)
		}
	}
	store := localsecrets.New(filepath.Join(e.ops.Dirs.Data, "secrets"))
	list, err := store.List(ctx, TestCluster, secrets.Filter{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range list {
		n, _ := secrets.ParseName(s.Name)
		v, err := store.Read(ctx, n)
		if err != nil {
			e.t.Fatal(err)
		}
		w[dryrun.KindSecret+"|secrets provider local|"+s.Name] = "value " + string(v)
	}
	if b, err := os.ReadFile(filepath.Join(e.ops.Dirs.Config, "contexts.json")); err == nil {
		w[dryrun.KindContexts+"|this machine|contexts.json"] = string(b)
	}
	_ = filepath.WalkDir(e.ops.WorkDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			w[dryrun.KindFile+"|"+filepath.Dir(p)+"|"+p] = string(b)
		}
		return nil
	})
	images := filepath.Join(e.ops.Dirs.Cache, "images")
	_ = filepath.WalkDir(images, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "index.json" {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(images, filepath.Dir(p))
			w[dryrun.KindImage+"|local image store "+images+"|"+filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	return w
}

// changed is the set of things that differ between two worlds, each with
// its new content ("" when it is gone).
func changed(before, after world) map[string]string {
	out := map[string]string{}
	for k, v := range after {
		if old, ok := before[k]; !ok || old != v {
			out[k] = v
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out[k] = ""
		}
	}
	return out
}

// planned is the same set as the dry run reported it.
func planned(changes []dryrun.Change) map[string]string {
	out := map[string]string{}
	for _, c := range changes {
		k := c.Kind + "|" + c.Where + "|" + c.Target
		switch {
		case c.Kind == dryrun.KindBucketTags, c.Kind == dryrun.KindDir:
			continue // not part of the world: tags and directories show in their contents
		case c.Action == dryrun.Deleted || c.Action == dryrun.Destroyed:
			out[k] = ""
		case c.Kind == dryrun.KindBucket:
			out[k] = "exists"
		case c.Kind == dryrun.KindSecret:
			out[k] = anyValue // a plan never holds a secret's value
		default:
			out[k] = string(c.After)
		}
	}
	return out
}

// anyValue stands for a secret's value, which a plan never holds.
const anyValue = "<any value>"

// createNonce is a nonce connect draws afresh for a bucket it creates: a
// dry run cannot know the real run's.
var createNonce = regexp.MustCompile(`"(?:bucketNonce|nonce)": "[0-9a-f]{64}"`)

// revisionWrite is the time and random ID of the index write a recorded
// revision names: each run draws its own.
var revisionWrite = regexp.MustCompile(`"time":"[^"]*","write":"[0-9a-f]{16}"`)

// comparable is content with what each run draws afresh replaced.
func comparable(s string) string {
	return revisionWrite.ReplaceAllString(createNonce.ReplaceAllString(s, "$$NONCE"), "$$WRITE")
}

// diffCase is a script run once as a dry run and once for real on the
// same starting state, set up by setup.
type diffCase struct {
	name, setup, script string
	// inPlan are lines the text plan must hold.
	inPlan []string
	// noChange marks a script that changes nothing.
	noChange bool
	// file runs a recipe of recipes/ with args instead of script.
	file string
	args []string
	// fakeNodes are NodeGroups whose fake nodes report ready during the
	// real run (t.fake_nodes), for a recipe that waits for them. What they
	// publish (the lease, status objects) is the fake's write, not the
	// recipe's: the comparison leaves it out.
	fakeNodes []string
}

var diffCases = []diffCase{
	{name: "deploy new", script: `podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v1", service = True)`},
	{name: "redeploy unchanged",
		setup:    `podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v1", service = True)`,
		script:   `podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v1", service = True)`,
		inPlan:   []string{"podmin.deployments.deploy(\"web\")", "  unchanged\n"},
		noChange: true},
	{name: "deploy dropping the Service",
		setup:  `podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v1", service = True)`,
		script: `podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v1")`,
		inPlan: []string{"- workers/web.service: \"services/default/web/sha512/", "~ workers/web.pod: "}},
	{name: "delete",
		setup:  `podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v1")`,
		script: `podmin.deployments.delete("web", nodegroup = "workers")`,
		inPlan: []string{"- workers/web.pod: "}},
	{name: "secrets",
		setup: `podmin.secrets.create("old", for_ = "web", value = "one")
podmin.secrets.create("kept", for_ = "web", value = "two")`,
		script: `podmin.secrets.create("token", for_ = "web", value = "s3cr3t")
podmin.secrets.update("kept", for_ = "web", value = "three")
podmin.secrets.destroy("old", for_ = "web", confirm = "test")`,
		inPlan: []string{"created   secret /test/default/web/token", "updated   secret /test/default/web/kept", "destroyed secret /test/default/web/old"}},
	{name: "images push", script: `podmin.images.push("hello:v1")`},
	{name: "images pull", script: `podmin.images.pull(REGISTRY + "/apps/hello:v2")`},
	{name: "contexts",
		setup: `podmin.contexts.connect("old", provider = "local", bucket = "old")
podmin.contexts.use("test")`,
		script: `podmin.contexts.connect("other", provider = "local", bucket = "other")
podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v1")
podmin.contexts.use("test")
podmin.contexts.disconnect("old")`},
	{name: "files",
		setup: `podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v1")`,
		script: `m = podmin.manifests.init("api", nodegroup = "workers", image = "api:v1", service = True, file = "api.yaml")
podmin.deployments.deploy("api", nodegroup = "workers", file = m.file, service = True)
podmin.deployments.preview(nodegroup = "workers", out = "pods")`},
}

// TestDryRunEqualsRealRun runs each script as a dry run and then for real
// against identical state: the dry run must change nothing, and the changes
// it reports must be exactly the changes the real run makes.
func TestDryRunEqualsRealRun(t *testing.T) {
	cases := append([]diffCase(nil), diffCases...)
	cases = append(cases, generatedCases(rand.New(rand.NewPCG(11, 0)), 12)...)
	cases = append(cases, recipeCases(t)...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { differential(t, tc) })
	}
}

func differential(t *testing.T, tc diffCase) {
	e := newEnv(t)
	ctx := context.Background()
	seedImage(t, e)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	e.sb.net.allow(host)
	if err := pushRandomIndex(ctx, host+"/apps/hello:v2", []string{"linux/amd64"}); err != nil {
		t.Fatal(err)
	}
	prelude := fmt.Sprintf(`REGISTRY = %q

def has_token():
    return "token" in [s.key for s in podmin.secrets.list(for_ = "web").secrets]

`, host)
	if tc.setup != "" {
		if _, err := e.run(Options{Yes: true}, prelude+tc.setup+"\n"); err != nil {
			t.Fatalf("setup: %v", err)
		}
	}
	script := e.write("case.star", prelude+tc.script+"\n")
	if tc.file != "" {
		script = tc.file
	}
	before := e.world()

	dry := e.host(Options{DryRun: true, Yes: true})
	if err := dry.Run(ctx, script, tc.args); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	plan := planned(dry.DryRunChanges())
	var text strings.Builder
	if err := dry.Plan().Write(&text, "table"); err != nil {
		t.Fatal(err)
	}
	for _, want := range tc.inPlan {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the plan lacks %q:\n%s", want, text.String())
		}
	}
	if err := dry.Close(); err != nil {
		t.Fatal(err)
	}
	if d := changed(before, e.world()); len(d) != 0 {
		t.Fatalf("the dry run changed %q", slices.Sorted(maps.Keys(d)))
	}

	for _, ng := range tc.fakeNodes {
		if err := e.sb.nodes.declare(ctx, ng, fakeGroup{nodes: 2, state: "ready"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.host(Options{Yes: true}).Run(ctx, script, tc.args); err != nil {
		t.Fatalf("real run: %v", err)
	}
	real := changed(before, e.world())
	if len(tc.fakeNodes) > 0 {
		for k := range real {
			if strings.HasSuffix(k, "|"+state.DNSLeaderPath) || strings.Contains(k, "|"+state.NodeGroupStatusPrefix) {
				delete(real, k)
			}
		}
	}
	if len(real) == 0 && !tc.noChange {
		t.Fatal("the real run changed nothing, so this case proves nothing")
	}
	for k, v := range real {
		p, ok := plan[k]
		switch {
		case !ok:
			t.Errorf("the real run changed %s, the dry run did not report it", k)
		case p == anyValue && v != "":
		case comparable(p) != comparable(v):
			t.Errorf("%s: the dry run reported content\n%s\nthe real run wrote\n%s", k, p, v)
		}
	}
	for k := range plan {
		if _, ok := real[k]; !ok {
			t.Errorf("the dry run reported %s, the real run did not change it", k)
		}
	}
}

// generatedCases strings random operations together, each valid in any
// order, so sequences the table does not list are compared too.
func generatedCases(r *rand.Rand, n int) []diffCase {
	ops := []string{
		`podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v1", service = True)`,
		`podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v2")`,
		`podmin.deployments.deploy("api", nodegroup = "edge", image = "api:v1", port = ["80:8080"])`,
		`podmin.deployments.delete("web", nodegroup = "workers", ignore_not_found = True)`,
		`podmin.deployments.delete("api", nodegroup = "edge", ignore_not_found = True)`,
		`if not has_token(): podmin.secrets.create("token", for_ = "web", value = "v1")`,
		`if has_token(): podmin.secrets.update("token", for_ = "web", value = "v2")`,
		`if has_token(): podmin.secrets.destroy("token", for_ = "web", confirm = "test")`,
		`podmin.images.push("hello:v1", destination = "hello:v3")`,
		`podmin.images.pull(REGISTRY + "/apps/hello:v2")`,
		`podmin.contexts.connect("other", provider = "local", bucket = "other")`,
		`podmin.contexts.use("test")`,
	}
	var out []diffCase
	for i := range n {
		var lines []string
		for range 3 + r.IntN(6) {
			lines = append(lines, ops[r.IntN(len(ops))])
		}
		// End on the test cluster so every case reads it back.
		lines = append(lines, `podmin.contexts.use("test") if podmin.contexts.current().cluster != "test" else None`)
		out = append(out, diffCase{name: fmt.Sprintf("generated %02d", i), script: strings.Join(lines, "\n")})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// recipeCases runs every recipe of recipes/ (rollout with the arguments it
// requires).
func recipeCases(t *testing.T) []diffCase {
	files, err := filepath.Glob(filepath.Join("..", "recipes", "*.star"))
	if err != nil {
		t.Fatal(err)
	}
	args := map[string][]string{"rollout.star": {"--image=hello:v2"}}
	fake := map[string][]string{"rollout.star": {"canary", "workers"}}
	var out []diffCase
	for _, f := range files {
		if strings.HasSuffix(f, "_test.star") {
			continue
		}
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, diffCase{name: "recipe " + filepath.Base(f), file: abs, args: args[filepath.Base(f)], fakeNodes: fake[filepath.Base(f)]})
	}
	if len(out) < 2 {
		t.Fatalf("found only %q in recipes/", files)
	}
	return out
}

// seedImage puts hello:v1 into the local image store, as podmin build would.
func seedImage(t *testing.T, e *env) {
	t.Helper()
	ref, err := oci.BuildRef("hello:v1")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	if err := pushRandomIndex(context.Background(), host+"/seed:v1", []string{"linux/amd64", "linux/arm64"}); err != nil {
		t.Fatal(err)
	}
	src, err := oci.RemoteRef(host + "/seed:v1")
	if err != nil {
		t.Fatal(err)
	}
	store := oci.NewStore(filepath.Join(e.ops.Dirs.Cache, "images"))
	if _, err := ociremote.Pull(context.Background(), store, src.Remote, ref.Repo, ref.Tag); err != nil && !errors.Is(err, fs.ErrExist) {
		t.Fatal(err)
	}
}
