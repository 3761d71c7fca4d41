// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/agent/workload"
	"podmin.dev/podmin/internal/nodepod"
)

// fakeStopper records each wait and what the static Pod directory held
// when it was asked; it answers with err, or blocks until ctx ends.
type fakeStopper struct {
	mu       sync.Mutex
	dir      string
	asked    []string // namespace/name@revision
	fileSeen []bool   // whether the Pod's file existed during the wait
	err      error
	block    bool
	noSocket bool
	// onAsk, when set, is called with each question before the answer.
	onAsk func()
}

func (s *fakeStopper) CanTell() bool { return !s.noSocket }

func (s *fakeStopper) WaitStopped(ctx context.Context, namespace, name, revision string) error {
	_, err := os.Stat(filepath.Join(s.dir, nodepod.FileName(name)))
	s.mu.Lock()
	s.asked = append(s.asked, namespace+"/"+name+"@"+revision)
	s.fileSeen = append(s.fileSeen, err == nil)
	s.mu.Unlock()
	if s.onAsk != nil {
		s.onAsk()
	}
	if s.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.err
}

// stopping is a reconciler with s as its Stopper, no settle pause, and
// whatever else tweak sets.
func (f *fixture) stopping(t testing.TB, s staticpod.Stopper, timeout time.Duration, tweak ...func(*staticpod.Options)) *staticpod.Reconciler {
	t.Helper()
	opts := staticpod.Options{
		Store: f.store, Cluster: "demo", NodeGroup: "workers", Root: f.root,
		Secrets:   map[string]mounts.Reader{"local": f.secrets},
		Publisher: f.services, BucketExists: f.bucket.BucketExists,
		Stopper: s, StopTimeout: timeout, StopSettle: -1,
	}
	for _, tw := range tweak {
		tw(&opts)
	}
	r, err := staticpod.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A Pod replaced by a new revision has its old file removed, and its new
// file is written only after the runtime says the old revision stopped; a
// new Pod is written at once, without asking.
func TestReplacedPodStopsBeforeItsNewFile(t *testing.T) {
	f := newFixture(t)
	s := &fakeStopper{dir: f.manifests()}
	r := f.stopping(t, s, time.Minute)
	v1 := f.deploy(t, "workers", "web", "hello:v1", false)
	mustReconcile(t, r)
	if len(s.asked) != 0 || !strings.Contains(f.files(t)["web.yaml"], "hello:v1") {
		t.Fatalf("a new Pod: asked %q, files %v", s.asked, names(f.files(t)))
	}
	v2 := f.deploy(t, "workers", "web", "hello:v2", false)
	res := mustReconcile(t, r)
	if want := "default/web@" + nodepod.Revision(v1); len(s.asked) != 1 || s.asked[0] != want {
		t.Fatalf("asked %q, want %q", s.asked, want)
	}
	if s.fileSeen[0] {
		t.Fatal("the old file was still in place while the old revision was stopping")
	}
	if got := f.files(t)["web.yaml"]; !strings.Contains(got, "hello:v2") || !strings.Contains(got, nodepod.Revision(v2)) || res.Written != 1 {
		t.Fatalf("after the replacement: written %d, web.yaml:\n%s", res.Written, got)
	}
	// The same revision again asks nothing.
	mustReconcile(t, r)
	if len(s.asked) != 1 {
		t.Fatalf("an unchanged pass asked %q", s.asked)
	}
}

// The wait never keeps the new revision out: a runtime that fails or
// never answers within the timeout still gets the new file.
func TestReplacedPodIsWrittenWhenTheStopCannotBeSeen(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *fakeStopper
	}{
		{"runtime gone", &fakeStopper{err: staticpod.ErrNoRuntime}},
		{"runtime error", &fakeStopper{err: errors.New("connection refused")}},
		{"no answer", &fakeStopper{block: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.s.dir = f.manifests()
			r := f.stopping(t, tc.s, 50*time.Millisecond)
			f.deploy(t, "workers", "web", "hello:v1", false)
			mustReconcile(t, r)
			f.deploy(t, "workers", "web", "hello:v2", false)
			start := time.Now()
			mustReconcile(t, r)
			if got := f.files(t)["web.yaml"]; !strings.Contains(got, "hello:v2") {
				t.Fatalf("web.yaml:\n%s", got)
			}
			if len(tc.s.asked) != 1 || time.Since(start) > 10*time.Second {
				t.Fatalf("asked %q, pass took %s", tc.s.asked, time.Since(start))
			}
		})
	}
}

// renewingIdentity stamps each Pod with the identity generation it holds,
// as the workload identity does with podmin.dev/identity-revision, and
// makes the Pod's identity directory beneath root, as it does too.
type renewingIdentity struct{ generation, root string }

func (id *renewingIdentity) AnnotatePod(_ context.Context, podYAML []byte) ([]byte, workload.Identity, error) {
	var pod map[string]any
	if err := yaml.Unmarshal(podYAML, &pod); err != nil {
		return nil, workload.Identity{}, err
	}
	meta := pod["metadata"].(map[string]any)
	if err := os.MkdirAll(filepath.Join(id.root, "run/podmin/workloads", meta["name"].(string), "identity"), 0o755); err != nil {
		return nil, workload.Identity{}, err
	}
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	ann["podmin.dev/identity-revision"] = id.generation
	meta["annotations"] = ann
	out, err := yaml.Marshal(pod)
	return out, workload.Identity{}, err
}

func (id *renewingIdentity) Forget([]string) error { return nil }

// A file change within one revision (a renewed identity) replaces the
// file in one rename, as before: the file is never absent and nothing
// waits.
func TestFileChangeWithinARevisionDoesNotStop(t *testing.T) {
	f := newFixture(t)
	s := &fakeStopper{dir: f.manifests()}
	id := &renewingIdentity{generation: "one", root: f.root}
	r := f.stopping(t, s, 0, func(o *staticpod.Options) { o.Identity = id })
	f.deploy(t, "workers", "web", "hello:v1", false)
	mustReconcile(t, r)
	if got := f.files(t)["web.yaml"]; !strings.Contains(got, "identity-revision: one") {
		t.Fatalf("web.yaml:\n%s", got)
	}
	id.generation = "two"
	r.IdentityChanged()
	res := mustReconcile(t, r)
	if got := f.files(t)["web.yaml"]; res.Written != 1 || !strings.Contains(got, "identity-revision: two") {
		t.Fatalf("written %d, web.yaml:\n%s", res.Written, got)
	}
	if len(s.asked) != 0 {
		t.Fatalf("a renewed identity waited for a stop: %q", s.asked)
	}
}

// Without a runtime to ask, a replaced Pod's file changes in one rename,
// as without a Stopper: it is never absent, and nothing waits.
func TestReplacedPodWithoutARuntimeIsRenamedOver(t *testing.T) {
	f := newFixture(t)
	s := &fakeStopper{dir: f.manifests(), noSocket: true}
	var absent bool
	r := f.stopping(t, s, 0, func(o *staticpod.Options) {
		o.Step = func(step staticpod.Step, file string) error {
			if step == staticpod.StepRename && file == "web.yaml" {
				if _, err := os.Stat(filepath.Join(f.manifests(), "web.yaml")); err != nil {
					absent = true
				}
			}
			return nil
		}
	})
	f.deploy(t, "workers", "web", "hello:v1", false)
	mustReconcile(t, r)
	absent = false
	f.deploy(t, "workers", "web", "hello:v2", false)
	mustReconcile(t, r)
	if got := f.files(t)["web.yaml"]; !strings.Contains(got, "hello:v2") || absent || len(s.asked) != 0 {
		t.Fatalf("absent before the rename: %v, asked %q, web.yaml:\n%s", absent, s.asked, got)
	}
}

// A pass that ends while a replaced Pod is stopping (the agent shutting
// down) still renames that Pod's new file: its old file is gone, and no
// Pod is left without one.
func TestReplacedPodGetsItsFileWhenThePassEnds(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &fakeStopper{block: true, onAsk: cancel}
	s.dir = f.manifests()
	r := f.stopping(t, s, time.Minute)
	f.deploy(t, "workers", "web", "hello:v1", false)
	mustReconcile(t, r)
	f.deploy(t, "workers", "web", "hello:v2", false)
	if _, err := r.Reconcile(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("pass: %v", err)
	}
	if ctx.Err() == nil {
		t.Fatal("the pass was not ended while the Pod was stopping")
	}
	if len(s.asked) != 1 {
		t.Fatalf("asked %q", s.asked)
	}
	if got := f.files(t)["web.yaml"]; !strings.Contains(got, "hello:v2") {
		t.Fatalf("web.yaml after the pass ended:\n%s", got)
	}
}

// A Pod deployed again soon after its deletion waits, like a replaced
// one, for the deleted Pod to stop before its file appears, so kubelet
// starts it at once rather than after its back-off; a Pod of a name
// never deleted does not wait.
func TestPodDeployedAgainWaitsForTheDeletedOne(t *testing.T) {
	f := newFixture(t)
	s := &fakeStopper{dir: f.manifests()}
	r := f.stopping(t, s, time.Minute)
	f.deploy(t, "workers", "web", "hello:v1", false)
	mustReconcile(t, r)
	ran := yamlRevision(t, f.files(t)["web.yaml"])
	f.remove(t, "workers", "web")
	mustReconcile(t, r)
	f.deploy(t, "workers", "web", "hello:v1", false)
	f.deploy(t, "workers", "api", "hello:v1", false)
	mustReconcile(t, r)
	if len(s.asked) != 1 || s.asked[0] != "default/web@"+ran || s.fileSeen[0] {
		t.Fatalf("asked %q (file present then: %v), want one wait for default/web@%s before its file", s.asked, s.fileSeen, ran)
	}
	if _, ok := f.files(t)["web.yaml"]; !ok {
		t.Fatal("web.yaml was not written after the wait")
	}
}

// yamlRevision reads podmin.dev/revision from a static Pod file.
func yamlRevision(t *testing.T, file string) string {
	t.Helper()
	var meta struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(file), &meta); err != nil {
		t.Fatal(err)
	}
	return meta.Metadata.Annotations[nodepod.RevisionAnnotation]
}
