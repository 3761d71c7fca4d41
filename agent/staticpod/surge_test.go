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

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/state"
)

// surgeGate answers each kind of question as its rule says (nil: yes)
// and records every question.
type surgeGate struct {
	mu    sync.Mutex
	rules map[staticpod.UpdateKind]func(staticpod.Update) bool
	asked []staticpod.Update
}

func (g *surgeGate) Admit(_ context.Context, u staticpod.Update) (bool, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, u)
	if rule := g.rules[u.Kind]; rule != nil && !rule(u) {
		return false, "not now: " + u.Kind.String()
	}
	return true, ""
}

func (g *surgeGate) set(k staticpod.UpdateKind, rule func(staticpod.Update) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.rules == nil {
		g.rules = map[staticpod.UpdateKind]func(staticpod.Update) bool{}
	}
	g.rules[k] = rule
}

// questions returns and forgets the questions asked so far.
func (g *surgeGate) questions() []staticpod.Update {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.asked
	g.asked = nil
	return out
}

func never(staticpod.Update) bool { return false }

// deploySurge commits a built-in deployment whose DaemonSet asks maxSurge
// 1 (maxUnavailable 0).
func (f *fixture) deploySurge(t testing.TB, name, image string, secrets ...string) state.Entry {
	t.Helper()
	opts := manifest.BuildOptions{Name: name, NodeGroup: "workers", Images: []string{image}, Service: true, Secrets: secrets}
	if len(secrets) > 0 {
		opts.SecretsProvider = "local"
	}
	data, err := manifest.Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	for i, d := range docs {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(d), &obj); err != nil {
			t.Fatal(err)
		}
		if obj["kind"] != "DaemonSet" {
			continue
		}
		obj["spec"].(map[string]any)["updateStrategy"] = map[string]any{"rollingUpdate": map[string]any{"maxSurge": 1, "maxUnavailable": 0}}
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		docs[i] = string(b)
	}
	ex, err := manifest.Extract([]byte(strings.Join(docs, "\n---\n")), manifest.ExtractOptions{Name: name, NodeGroup: "workers"})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := state.NewKey("workers", name)
	res, err := state.NewCommitter(f.bucket, state.CommitOptions{}).Deploy(context.Background(), state.Deployment{
		Key: k, Namespace: ex.Namespace, Pod: ex.PodYAML, ServiceName: ex.Service.Name, Service: ex.ServiceYAML})
	if err != nil {
		t.Fatal(err)
	}
	return res.Entry
}

// surging is a reconciler with the gate g and the Stopper s (nil: none),
// recording the deployments' states into last.
func (f *fixture) surging(t testing.TB, g staticpod.Gate, s staticpod.Stopper, last *[]staticpod.DeploymentState) *staticpod.Reconciler {
	t.Helper()
	r, err := staticpod.New(staticpod.Options{
		Store: f.store, Cluster: "demo", NodeGroup: "workers", Root: f.root,
		Secrets:   map[string]mounts.Reader{"local": f.secrets},
		Publisher: f.services, BucketExists: f.bucket.BucketExists, Gate: g,
		Stopper: s, StopTimeout: time.Minute, StopSettle: -1,
		Hooks: staticpod.Hooks{Deployments: func(s []staticpod.DeploymentState) { *last = s }},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// staticPod decodes a static Pod file.
func staticPod(t testing.TB, content string) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := yaml.Unmarshal([]byte(content), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

// hostPaths lists a static Pod's hostPath volumes.
func hostPaths(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if v.HostPath != nil {
			out = append(out, v.HostPath.Path)
		}
	}
	return out
}

// Under maxSurge the new revision starts as a second static Pod beside
// the running one, with another name for kubelet and the deployment's
// identity, values and workload directory; the old one stops only when
// the Gate lets it go, and the next update starts under the first name.
func TestSurgeStartsTheNewRevisionBesideTheRunningOne(t *testing.T) {
	f := newFixture(t)
	f.secrets.values["/demo/default/web/token"] = []byte("v1-token")
	g := &surgeGate{}
	g.set(staticpod.Retire, never)
	var last []staticpod.DeploymentState
	r := f.surging(t, g, nil, &last)
	v1 := nodepod.Revision(f.deploySurge(t, "web", "hello:v1", "token"))
	mustReconcile(t, r)
	first := f.files(t)["web.yaml"]
	if first == "" || len(g.questions()) != 0 {
		t.Fatalf("new Pod: files %v", names(f.files(t)))
	}

	f.secrets.values["/demo/default/web/token"] = []byte("v2-token")
	v2 := nodepod.Revision(f.deploySurge(t, "web", "hello:v2", "token"))
	res := mustReconcile(t, r)
	files := visible(f.files(t))
	if len(files) != 2 || files["web.yaml"] != first || !strings.Contains(files["web.surge.yaml"], "hello:v2") {
		t.Fatalf("after the surge: %v (web.yaml unchanged: %v)", names(files), files["web.yaml"] == first)
	}
	asked := g.questions()
	if len(asked) != 1 || asked[0].Kind != staticpod.Surge || asked[0].From != v1 || asked[0].To != v2 || asked[0].Static != "web" || asked[0].FromIncarnation == "" {
		t.Fatalf("the gate was asked %+v", asked)
	}
	second := staticPod(t, files["web.surge.yaml"])
	if second.Name != "web.surge" || second.Annotations[nodepod.RevisionAnnotation] != v2 {
		t.Fatalf("second Pod: name %q, revision %q", second.Name, second.Annotations[nodepod.RevisionAnnotation])
	}
	if got, want := hostPaths(second), hostPaths(staticPod(t, first)); strings.Join(got, " ") != strings.Join(want, " ") || !strings.Contains(strings.Join(got, " "), "/run/podmin/workloads/web/") {
		t.Fatalf("the second Pod mounts %v, the first %v: both must mount the deployment's directories", got, want)
	}
	if v, err := os.ReadFile(filepath.Join(f.root, "run/podmin/workloads/web/secrets/local/token")); err != nil || string(v) != "v2-token" {
		t.Fatalf("the deployment's value: %q, %v", v, err)
	}
	if len(res.Retiring) != 1 || res.Written != 1 || res.Removed != 0 {
		t.Fatalf("result: %+v", res)
	}
	if len(last) != 1 || last[0].Applied != v2 || last[0].Retiring != v1 || last[0].Waiting != "" {
		t.Fatalf("states: %+v", last)
	}

	// The next pass (the old Pod's retirement keeps the passes coming,
	// without a commit) asks to retire the old Pod, which the gate
	// refuses until it lets go.
	if res := mustReconcile(t, r); res.Unchanged || len(res.Retiring) != 1 || len(visible(f.files(t))) != 2 {
		t.Fatalf("second pass: %+v, files %v", res, names(f.files(t)))
	}
	asked = g.questions()
	if len(asked) != 1 {
		t.Fatalf("second pass asked %+v", asked)
	}
	if r := asked[0]; r.Kind != staticpod.Retire || r.From != v1 || r.To != v2 || r.Keep != v2 || r.Static != "web" || r.KeepIncarnation == "" || r.FromIncarnation == "" {
		t.Fatalf("retire question: %+v", r)
	}
	if last[0].RetireWaiting != "not now: retire" || last[0].Waiting != "" {
		t.Fatalf("states: %+v", last)
	}
	g.set(staticpod.Retire, nil)
	res = mustReconcile(t, r)
	files = visible(f.files(t))
	if len(files) != 1 || files["web.surge.yaml"] == "" || res.Removed != 1 || res.Written != 0 {
		t.Fatalf("after the retirement: %v, %+v", names(files), res)
	}
	if last[0].Applied != v2 || last[0].Retiring != "" {
		t.Fatalf("states after the retirement: %+v", last)
	}
	if _, err := os.Stat(filepath.Join(f.root, "run/podmin/workloads/web/identity")); err != nil {
		t.Fatalf("the workload directory went with the first Pod: %v", err)
	}
	if res := mustReconcile(t, r); !res.Unchanged {
		t.Fatalf("the pass after the update was not idle: %+v", res)
	}

	// The next update starts under the first name again.
	g.questions()
	v3 := nodepod.Revision(f.deploySurge(t, "web", "hello:v3", "token"))
	g.set(staticpod.Retire, never)
	mustReconcile(t, r)
	files = visible(f.files(t))
	if len(files) != 2 || !strings.Contains(files["web.yaml"], "hello:v3") || !strings.Contains(files["web.surge.yaml"], "hello:v2") {
		t.Fatalf("third revision: %v", names(files))
	}
	if p := staticPod(t, files["web.yaml"]); p.Name != "web" || p.Annotations[nodepod.RevisionAnnotation] != v3 {
		t.Fatalf("third revision's Pod: %q %q", p.Name, p.Annotations[nodepod.RevisionAnnotation])
	}
	if asked := g.questions(); asked[0].Kind != staticpod.Surge || asked[0].Static != "web.surge" {
		t.Fatalf("third revision asked %+v", asked)
	}
}

// A node never runs three Pods of a deployment: a commit that arrives
// while two run retires one first (the newer, which never took over,
// unless only the older may go), and only then starts the new revision,
// in the same pass, under the freed name once its Pod stopped.
func TestSurgeNeverRunsThreePods(t *testing.T) {
	f := newFixture(t)
	g := &surgeGate{}
	g.set(staticpod.Retire, never)
	var last []staticpod.DeploymentState
	stop := &fakeStopper{dir: f.manifests()}
	r := f.surging(t, g, stop, &last)
	v1 := nodepod.Revision(f.deploySurge(t, "web", "hello:v1"))
	mustReconcile(t, r)
	v2 := nodepod.Revision(f.deploySurge(t, "web", "hello:v2"))
	mustReconcile(t, r)
	// The second Pod is the newer file, whatever the clock's resolution.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(f.manifests(), "web.surge.yaml"), later, later); err != nil {
		t.Fatal(err)
	}
	g.questions()

	v3 := nodepod.Revision(f.deploySurge(t, "web", "hello:v3"))
	res := mustReconcile(t, r)
	if files := visible(f.files(t)); len(files) != 2 || !strings.Contains(files["web.yaml"], "hello:v1") || !strings.Contains(files["web.surge.yaml"], "hello:v2") {
		t.Fatalf("a third Pod while two run: %v", names(files))
	}
	asked := g.questions()
	if len(asked) != 2 || asked[0].Kind != staticpod.Retire || asked[0].From != v2 || asked[0].Keep != v1 || asked[0].To != v3 ||
		asked[1].Kind != staticpod.Retire || asked[1].From != v1 || asked[1].Keep != v2 {
		t.Fatalf("questions: %+v", asked)
	}
	if len(res.Held) != 1 || res.Held[0].Revision != v3 || last[0].Waiting == "" || last[0].Applied != v2 || last[0].Retiring != v1 {
		t.Fatalf("held %+v, states %+v", res.Held, last)
	}

	// Only the older may go (the newer is ready, the older is not).
	g.set(staticpod.Retire, func(u staticpod.Update) bool { return u.From == v1 })
	mustReconcile(t, r)
	files := visible(f.files(t))
	if len(files) != 2 || !strings.Contains(files["web.yaml"], "hello:v3") || !strings.Contains(files["web.surge.yaml"], "hello:v2") {
		t.Fatalf("after the older retired: %v", names(files))
	}
	asked = g.questions()
	if len(asked) < 3 || asked[2].Kind != staticpod.Surge || asked[2].From != v2 || asked[2].To != v3 || asked[2].Static != "web.surge" {
		t.Fatalf("questions: %+v", asked)
	}
	if got := stop.asked; len(got) != 1 || got[0] != "default/web@"+v1 {
		t.Fatalf("the new file did not wait for the retired Pod of its name to stop: %v", got)
	}
	if last[0].Applied != v3 || last[0].Retiring != v2 {
		t.Fatalf("states: %+v", last)
	}
}

// The files are the whole state: an agent that restarts with two Pods of
// a deployment on disk retires one before anything else, and one that
// died before the second Pod's file was renamed asks for the surge again.
func TestSurgeResumesAfterARestart(t *testing.T) {
	f := newFixture(t)
	v1 := nodepod.Revision(f.deploySurge(t, "web", "hello:v1"))
	g := &surgeGate{}
	g.set(staticpod.Retire, never)
	var last []staticpod.DeploymentState
	mustReconcile(t, f.surging(t, g, nil, &last))
	v2 := nodepod.Revision(f.deploySurge(t, "web", "hello:v2"))

	// The agent dies just before the second Pod's file is renamed.
	crash := errors.New("killed")
	r, err := staticpod.New(staticpod.Options{Store: f.store, Cluster: "demo", NodeGroup: "workers", Root: f.root,
		Publisher: f.services, Gate: g, Step: func(s staticpod.Step, file string) error {
			if s == staticpod.StepRename && file == "web.surge.yaml" {
				return crash
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background()); !errors.Is(err, crash) {
		t.Fatalf("err = %v", err)
	}
	if files := visible(f.files(t)); len(files) != 1 || files["web.yaml"] == "" {
		t.Fatalf("after the crash: %v", names(files))
	}
	g.questions()
	restarted := f.surging(t, g, nil, &last)
	mustReconcile(t, restarted)
	if files := visible(f.files(t)); len(files) != 2 {
		t.Fatalf("after the restart: %v", names(f.files(t)))
	}
	if asked := g.questions(); asked[0].Kind != staticpod.Surge {
		t.Fatalf("the restarted agent asked %+v", asked)
	}

	// Another restart with both Pods on disk: the old one retires once
	// the gate lets it, and nothing else is written.
	g.set(staticpod.Retire, nil)
	again := f.surging(t, g, nil, &last)
	res := mustReconcile(t, again)
	files := visible(f.files(t))
	if len(files) != 1 || !strings.Contains(files["web.surge.yaml"], "hello:v2") || res.Written != 0 || res.Removed != 1 {
		t.Fatalf("after the second restart: %v, %+v", names(files), res)
	}
	if asked := g.questions(); len(asked) != 1 || asked[0].Kind != staticpod.Retire || asked[0].From != v1 || asked[0].Keep != v2 {
		t.Fatalf("questions: %+v", asked)
	}
}

// A rollback while two Pods run keeps the one of the committed revision
// (untouched) and retires the other.
func TestSurgeRollbackKeepsTheRunningRevision(t *testing.T) {
	f := newFixture(t)
	g := &surgeGate{}
	g.set(staticpod.Retire, never)
	var last []staticpod.DeploymentState
	r := f.surging(t, g, nil, &last)
	e1 := f.deploySurge(t, "web", "hello:v1")
	mustReconcile(t, r)
	before := f.files(t)["web.yaml"]
	v2 := nodepod.Revision(f.deploySurge(t, "web", "hello:v2"))
	mustReconcile(t, r)
	g.questions()

	if e := f.deploySurge(t, "web", "hello:v1"); e != e1 {
		t.Fatalf("the rollback is another entry: %+v", e)
	}
	g.set(staticpod.Retire, nil)
	mustReconcile(t, r)
	files := visible(f.files(t))
	if len(files) != 1 || files["web.yaml"] != before {
		t.Fatalf("after the rollback: %v (web.yaml unchanged: %v)", names(files), files["web.yaml"] == before)
	}
	if asked := g.questions(); len(asked) != 1 || asked[0].Kind != staticpod.Retire || asked[0].From != v2 || asked[0].Static != "web.surge" {
		t.Fatalf("questions: %+v", asked)
	}
	if last[0].Applied != nodepod.Revision(e1) || last[0].Retiring != "" {
		t.Fatalf("states: %+v", last)
	}
}

// Deleting a deployment that runs two Pods removes both files and its
// workload directory.
func TestSurgeDeleteRemovesBothPods(t *testing.T) {
	f := newFixture(t)
	g := &surgeGate{}
	g.set(staticpod.Retire, never)
	var last []staticpod.DeploymentState
	r := f.surging(t, g, nil, &last)
	f.deploySurge(t, "web", "hello:v1")
	mustReconcile(t, r)
	f.deploySurge(t, "web", "hello:v2")
	mustReconcile(t, r)
	if len(visible(f.files(t))) != 2 {
		t.Fatal("no second Pod")
	}
	f.remove(t, "workers", "web")
	res := mustReconcile(t, r)
	if len(visible(f.files(t))) != 0 || res.Removed != 2 {
		t.Fatalf("after the delete: %v, %+v", names(f.files(t)), res)
	}
	if _, err := os.Stat(filepath.Join(f.root, "run/podmin/workloads/web")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the workload directory stayed: %v", err)
	}
}

// Without a Gate (no coordination) updates are applied at once, in
// place, maxSurge or not, and two Pods left on disk become one.
func TestSurgeWithoutAGateReplacesInPlace(t *testing.T) {
	f := newFixture(t)
	var last []staticpod.DeploymentState
	r := f.surging(t, nil, nil, &last)
	f.deploySurge(t, "web", "hello:v1")
	mustReconcile(t, r)
	f.deploySurge(t, "web", "hello:v2")
	mustReconcile(t, r)
	if files := visible(f.files(t)); len(files) != 1 || !strings.Contains(files["web.yaml"], "hello:v2") {
		t.Fatalf("files: %v", names(files))
	}
	second, err := nodepod.Rename([]byte(f.files(t)["web.yaml"]), "web.surge")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.manifests(), "web.surge.yaml"), second, 0o644); err != nil {
		t.Fatal(err)
	}
	f.deploySurge(t, "web", "hello:v3")
	mustReconcile(t, r)
	if files := visible(f.files(t)); len(files) != 1 || !strings.Contains(files["web.surge.yaml"]+files["web.yaml"], "hello:v3") {
		t.Fatalf("files: %v", names(files))
	}
}

// A deployment without maxSurge that finds two of its Pods on disk (its
// strategy changed during a surge) retires one, then replaces the other in
// place.
func TestTwoPodsWithoutSurgeRetireFirst(t *testing.T) {
	f := newFixture(t)
	g := &surgeGate{}
	g.set(staticpod.Retire, never)
	var last []staticpod.DeploymentState
	r := f.surging(t, g, nil, &last)
	f.deploySurge(t, "web", "hello:v1")
	mustReconcile(t, r)
	f.deploySurge(t, "web", "hello:v2")
	mustReconcile(t, r)
	g.questions()
	g.set(staticpod.Retire, nil)
	v3 := nodepod.Revision(f.deploy(t, "workers", "web", "hello:v3", true))
	mustReconcile(t, r)
	files := visible(f.files(t))
	if len(files) != 1 || !strings.Contains(files["web.yaml"]+files["web.surge.yaml"], "hello:v3") {
		t.Fatalf("files: %v", names(files))
	}
	asked := g.questions()
	if len(asked) != 2 || asked[0].Kind != staticpod.Retire || asked[1].Kind != staticpod.Replace || asked[1].To != v3 {
		t.Fatalf("questions: %+v", asked)
	}
}

// A deployment kept at its last valid state keeps its files under both
// names and its workload directory (its values and identity).
func TestFailedDeploymentKeepsItsPodsAndWorkloadDirectory(t *testing.T) {
	f := newFixture(t)
	f.secrets.values["/demo/default/web/token"] = []byte("v1-token")
	g := &surgeGate{}
	g.set(staticpod.Retire, never)
	var last []staticpod.DeploymentState
	r := f.surging(t, g, nil, &last)
	f.deploySurge(t, "web", "hello:v1", "token")
	mustReconcile(t, r)
	f.deploySurge(t, "web", "hello:v2", "token")
	mustReconcile(t, r)
	before := visible(f.files(t))
	// The next revision declares a value that does not exist.
	v3 := nodepod.Revision(f.deploySurge(t, "web", "hello:v3", "token", "missing"))
	_, err := r.Reconcile(context.Background())
	var pf *staticpod.PodsFailedError
	if !errors.As(err, &pf) {
		t.Fatalf("err = %v", err)
	}
	files := visible(f.files(t))
	if len(files) != 2 || files["web.yaml"] != before["web.yaml"] || files["web.surge.yaml"] != before["web.surge.yaml"] {
		t.Fatalf("files after the failure: %v", names(files))
	}
	if v, err := os.ReadFile(filepath.Join(f.root, "run/podmin/workloads/web/secrets/local/token")); err != nil || string(v) != "v1-token" {
		t.Fatalf("the deployment's value after the failure: %q, %v", v, err)
	}
	if last[0].Error == nil || last[0].Error.Kind != state.ErrorSecret || last[0].Error.Revision != v3 {
		t.Fatalf("states: %+v", last)
	}
}
