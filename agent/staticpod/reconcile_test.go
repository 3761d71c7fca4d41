// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/state"
)

func TestReconcilePublishesOnlyItsNodeGroup(t *testing.T) {
	f := newFixture(t)
	f.secrets.values["/demo/default/web/db-url"] = []byte("postgres://db")
	web := f.deploy(t, "workers", "web", "hello:v1", true, "db-url")
	f.deploy(t, "workers", "api", "api:v1", false)
	f.deploy(t, "edge", "proxy", "proxy:v1", true)
	// Things Podmin does not own: a file in another directory and a
	// non-YAML file in its own.
	foreign := filepath.Join(f.root, "etc", "kubernetes", "manifests", "other.yaml")
	for _, p := range []string{foreign, filepath.Join(f.manifests(), "README")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("not podmin's"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	r := f.reconciler(t, nil)
	res := mustReconcile(t, r)
	if res.Pods != 2 || res.Written != 2 || res.Removed != 0 {
		t.Fatalf("result %+v", res)
	}
	files := f.files(t)
	if got := names(visible(files)); !slices.Equal(got, []string{"api.yaml", "web.yaml"}) {
		t.Fatalf("static Pods %q", got)
	}
	if files["README"] != "not podmin's" {
		t.Fatal("a non-YAML file of the manifests directory was touched")
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(files["web.yaml"]), &pod); err != nil {
		t.Fatal(err)
	}
	if pod.Annotations[nodepod.RevisionAnnotation] != nodepod.Revision(web) || pod.Annotations["podmin.dev/service"] != "web" {
		t.Fatalf("annotations %v", pod.Annotations)
	}
	var mounted bool
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		mounted = mounted || (m.MountPath == "/var/run/podmin/local" && m.ReadOnly && m.Name == "podmin-local")
	}
	if !mounted || !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool {
		return v.HostPath != nil && v.HostPath.Path == "/run/podmin/workloads/web/secrets/local" && *v.HostPath.Type == corev1.HostPathDirectory
	}) {
		t.Fatalf("no read-only local values mount:\n%s", files["web.yaml"])
	}
	value := filepath.Join(f.root, "run", "podmin", "workloads", "web", "secrets", "local", "db-url")
	if b, err := os.ReadFile(value); err != nil || string(b) != "postgres://db" {
		t.Fatalf("value %q, %v", b, err)
	}
	if st, _ := os.Stat(value); st.Mode().Perm() != 0o444 {
		t.Fatalf("value mode %v", st.Mode())
	}
	for _, p := range []string{"web", "api"} {
		if st, err := os.Stat(filepath.Join(f.root, "run", "podmin", "workloads", p, "identity")); err != nil || !st.IsDir() {
			t.Fatalf("identity directory of %s: %v", p, err)
		}
	}
	if b, _ := os.ReadFile(foreign); string(b) != "not podmin's" {
		t.Fatal("a file outside the manifests directory was touched")
	}
	svcs, n := f.services.Last()
	if n != 1 || len(svcs) != 1 || svcs[0].ID.String() != "default/web" || svcs[0].Pod != "web" || svcs[0].Revision != nodepod.Revision(web) {
		t.Fatalf("services %+v (%d publications)", svcs, n)
	}

	// Update web (new revision, values fetched again), delete api.
	reads := f.secrets.reads
	f.deploy(t, "workers", "web", "hello:v2", true, "db-url")
	f.remove(t, "workers", "api")
	before, _ := os.Stat(filepath.Join(f.manifests(), "web.yaml"))
	res = mustReconcile(t, r)
	if res.Written != 1 || res.Removed != 1 || f.secrets.reads != reads+1 {
		t.Fatalf("result %+v, %d value reads", res, f.secrets.reads-reads)
	}
	after, _ := os.Stat(filepath.Join(f.manifests(), "web.yaml"))
	if os.SameFile(before, after) {
		t.Fatal("web.yaml was rewritten in place, not replaced by a rename")
	}
	if got := names(visible(f.files(t))); !slices.Equal(got, []string{"web.yaml"}) || !strings.Contains(f.files(t)["web.yaml"], "hello:v2") {
		t.Fatalf("static Pods %q", got)
	}
	if _, err := os.Stat(filepath.Join(f.root, "run", "podmin", "workloads", "api", "secrets")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("values of deleted api: %v", err)
	}
	if b, _ := os.ReadFile(foreign); string(b) != "not podmin's" {
		t.Fatal("a file outside the manifests directory was touched")
	}

	// Deleting everything leaves an empty directory and an empty Service set.
	f.remove(t, "workers", "web")
	mustReconcile(t, r)
	if got := visible(f.files(t)); len(got) != 0 {
		t.Fatalf("left %q", names(got))
	}
	if svcs, _ := f.services.Last(); len(svcs) != 0 {
		t.Fatalf("services %+v", svcs)
	}
}

// An idle poll is one HEAD of the index and nothing else; a missing
// index is empty desired state.
func TestIdlePollsCostOneHead(t *testing.T) {
	f := newFixture(t)
	r := f.reconciler(t, nil)
	mustReconcile(t, r) // missing index: nothing to do, nothing fails
	for range 20 {
		f.deploy(t, "workers", "app-"+string(rune('a'+len(f.files(t)))), "app:v1", true)
		mustReconcile(t, r)
	}
	f.store.ResetCounts()
	for i := range 10 {
		if res := mustReconcile(t, r); !res.Unchanged {
			t.Fatalf("poll %d: %+v", i, res)
		}
	}
	if c := f.store.Counts(); c.Head != 10 || c.Total() != 10 {
		t.Fatalf("10 idle polls made %+v, want exactly 10 HEADs of the index", c)
	}
}

// A failing deployment keeps its last valid file and Service and is named
// in the error; the rest of the NodeGroup converges (api is removed), and
// the next pass converges once the cause is gone.
func TestFailuresKeepTheLastValidState(t *testing.T) {
	tests := []struct {
		name    string
		break_  func(t *testing.T, f *fixture, e state.Entry) func()
		wantErr string
	}{
		{"corrupt payload", func(t *testing.T, f *fixture, e state.Entry) func() {
			p := filepath.Join(f.bucket.Dir(), e.Pod)
			good, _ := os.ReadFile(p)
			if err := os.WriteFile(p, append(good, "# tampered\n"...), 0o644); err != nil {
				t.Fatal(err)
			}
			return func() { _ = os.WriteFile(p, good, 0o644) }
		}, "payload does not match its digest"},
		{"missing payload", func(t *testing.T, f *fixture, e state.Entry) func() {
			p := filepath.Join(f.bucket.Dir(), e.Pod)
			good, _ := os.ReadFile(p)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			return func() { _ = os.WriteFile(p, good, 0o644) }
		}, "object not found"},
		{"oversized payload", func(t *testing.T, f *fixture, e state.Entry) func() {
			p := filepath.Join(f.bucket.Dir(), e.Pod)
			good, _ := os.ReadFile(p)
			if err := os.WriteFile(p, make([]byte, staticpod.MaxPayloadBytes+1), 0o644); err != nil {
				t.Fatal(err)
			}
			return func() { _ = os.WriteFile(p, good, 0o644) }
		}, "more than the 2097152 byte limit"},
		{"secret fetch failure", func(t *testing.T, f *fixture, _ state.Entry) func() {
			f.secrets.fail = errors.New("provider unavailable")
			return func() { f.secrets.fail = nil }
		}, "provider unavailable"},
		{"values cannot be written", func(t *testing.T, f *fixture, _ state.Entry) func() {
			// A file where the Pod's provider directory belongs.
			p := filepath.Join(f.root, "run", "podmin", "workloads", "web", "secrets", "local")
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("in the way"), 0o644); err != nil {
				t.Fatal(err)
			}
			return func() { _ = os.Remove(p) }
		}, "web"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.secrets.values["/demo/default/web/token"] = []byte("t1")
			old := f.deploy(t, "workers", "web", "hello:v1", true, "token")
			f.deploy(t, "workers", "api", "api:v1", false)
			r := f.reconciler(t, nil)
			mustReconcile(t, r)
			good := f.files(t)

			e := f.deploy(t, "workers", "web", "hello:v2", true, "token")
			f.remove(t, "workers", "api")
			f.deploy(t, "workers", "db", "db:v1", true)
			repair := tc.break_(t, f, e)
			res, err := r.Reconcile(context.Background())
			var pf *staticpod.PodsFailedError
			if !errors.As(err, &pf) || len(pf.Failures) != 1 || pf.Failures[0].Pod != "web" || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want web kept with %q", err, tc.wantErr)
			}
			if len(res.Failed) != 1 || res.Removed != 1 || res.Written != 1 {
				t.Fatalf("result %+v, want db written, api removed, web failed", res)
			}
			got := visible(f.files(t))
			if got["web.yaml"] != good["web.yaml"] || !strings.Contains(got["db.yaml"], "db:v1") || len(got) != 2 {
				t.Fatalf("files after a failure: %q, want web kept, db written, api removed", names(got))
			}
			if _, err := os.Stat(filepath.Join(f.root, "run", "podmin", "workloads", "api")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("workload directory of deleted api: %v", err)
			}
			svcs, _ := f.services.Last()
			if len(svcs) != 2 || svcs[0].Pod != "db" || svcs[1].Pod != "web" || svcs[1].Revision != nodepod.Revision(old) {
				t.Fatalf("services %+v, want db's and web's last published", svcs)
			}
			if c := r.Counters(); c.PodFailures["web"] != 1 || c.Failures != 0 {
				t.Fatalf("counters %+v", c)
			}
			repair()
			mustReconcile(t, r)
			if got := names(visible(f.files(t))); !slices.Equal(got, []string{"db.yaml", "web.yaml"}) || !strings.Contains(f.files(t)["web.yaml"], "hello:v2") {
				t.Fatalf("did not converge: %q", got)
			}
			if svcs, _ := f.services.Last(); len(svcs) != 2 || svcs[1].Revision != nodepod.Revision(e) {
				t.Fatalf("services %+v after repair", svcs)
			}
		})
	}
}

// An index that changes between the first read and publication is not
// published: the pass restarts at once with the newer index, and that is
// not a failure.
func TestIndexChangedMidReconcile(t *testing.T) {
	f := newFixture(t)
	f.deploy(t, "workers", "web", "hello:v1", false)
	mustReconcile(t, f.reconciler(t, nil))
	f.deploy(t, "workers", "web", "hello:v2", false)
	var seen []string
	changes := 0
	r := f.reconciler(t, func(s staticpod.Step, _ string) error {
		if s == staticpod.StepStaged {
			seen = append(seen, f.files(t)["web.yaml"])
			if changes < 2 {
				changes++
				f.deploy(t, "workers", "web", fmt.Sprintf("hello:v%d", 2+changes), false)
			}
		}
		return nil
	})
	res := mustReconcile(t, r)
	if !strings.Contains(f.files(t)["web.yaml"], "hello:v4") || res.Written != 1 {
		t.Fatalf("did not publish the newest index: %+v", res)
	}
	for _, s := range seen {
		if !strings.Contains(s, "hello:v1") {
			t.Fatal("published a superseded index")
		}
	}
	if c := r.Counters(); c.Restarts != 2 || c.Failures != 0 || c.Passes != 1 {
		t.Fatalf("counters %+v, want 2 restarts in 1 pass", c)
	}
}

// A store error on the confirming read is not mistaken for "unchanged".
func TestConfirmReadFailure(t *testing.T) {
	f := newFixture(t)
	f.deploy(t, "workers", "web", "hello:v1", false)
	// The pass reads the NodeGroup's view, so its first GET of the index
	// is the confirming one.
	f.store.SetRules(faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpGet}, Prefix: state.IndexPath, Limit: 1})
	r := f.reconciler(t, nil)
	if _, err := r.Reconcile(context.Background()); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("err %v", err)
	}
	if c := r.Counters(); c.Reads[staticpod.ReadView] != 1 {
		t.Fatalf("the pass did not read the view: %+v", c)
	}
	if len(f.files(t)) != 0 {
		t.Fatal("published without a confirmed index")
	}
}

// withoutIncarnation drops the podmin.dev/incarnation annotation from
// static Pod files: two nodes draw different ones for the same Pod.
func withoutIncarnation(files map[string]string) map[string]string {
	re := regexp.MustCompile(`(?m)^\s*podmin\.dev/incarnation: .*\n`)
	out := map[string]string{}
	for n, c := range files {
		out[n] = re.ReplaceAllString(c, "")
	}
	return out
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
