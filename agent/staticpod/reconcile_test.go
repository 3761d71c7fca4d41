// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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

// An idle poll is one conditional index read and nothing else; a missing
// index is empty desired state.
func TestIdlePollsCostOneConditionalRead(t *testing.T) {
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
	if c := f.store.Counts(); c.Get != 10 || c.Total() != 10 {
		t.Fatalf("10 idle polls made %+v, want exactly 10 conditional index reads", c)
	}
}

// Each failure before publication keeps the last valid state, changes no
// file and says why; the next pass converges once the cause is gone.
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
		{"secret fetch failure", func(t *testing.T, f *fixture, _ state.Entry) func() {
			f.secrets.fail = errors.New("provider unavailable")
			return func() { f.secrets.fail = nil }
		}, "provider unavailable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.secrets.values["/demo/default/web/token"] = []byte("t1")
			f.deploy(t, "workers", "web", "hello:v1", true, "token")
			f.deploy(t, "workers", "api", "api:v1", false)
			r := f.reconciler(t, nil)
			mustReconcile(t, r)
			good := f.files(t)
			_, published := f.services.Last()

			e := f.deploy(t, "workers", "web", "hello:v2", true, "token")
			f.remove(t, "workers", "api")
			repair := tc.break_(t, f, e)
			_, err := r.Reconcile(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
			got := f.files(t)
			if tc.name == "secret fetch failure" {
				// Only the Pod whose values failed keeps its last valid
				// file; the rest of the NodeGroup converges.
				delete(good, "api.yaml")
			}
			if !equal(got, good) {
				t.Fatalf("files after a failure: %q, want %q", names(got), names(good))
			}
			if _, n := f.services.Last(); n != published {
				t.Fatal("Services published after a failure")
			}
			repair()
			mustReconcile(t, r)
			if got := names(visible(f.files(t))); !slices.Equal(got, []string{"web.yaml"}) || !strings.Contains(f.files(t)["web.yaml"], "hello:v2") {
				t.Fatalf("did not converge: %q", got)
			}
		})
	}
}

// An index that changes between the first read and publication is not
// published; the retry publishes the newer one.
func TestIndexChangedMidReconcile(t *testing.T) {
	f := newFixture(t)
	f.deploy(t, "workers", "web", "hello:v1", false)
	mustReconcile(t, f.reconciler(t, nil))
	good := f.files(t)
	f.deploy(t, "workers", "web", "hello:v2", false)
	changed := false
	r := f.reconciler(t, func(s staticpod.Step, _ string) error {
		if s == staticpod.StepStaged && !changed {
			changed = true
			f.deploy(t, "workers", "web", "hello:v3", false)
		}
		return nil
	})
	_, err := r.Reconcile(context.Background())
	if err == nil || !strings.Contains(err.Error(), "the deployment index changed during reconciliation") {
		t.Fatalf("err %v", err)
	}
	if !equal(f.files(t), good) {
		t.Fatal("published a superseded index")
	}
	mustReconcile(t, r)
	if !strings.Contains(f.files(t)["web.yaml"], "hello:v3") {
		t.Fatal("did not converge to the newest index")
	}
}

// A store error on the confirming read is not mistaken for "unchanged".
func TestConfirmReadFailure(t *testing.T) {
	f := newFixture(t)
	f.deploy(t, "workers", "web", "hello:v1", false)
	f.store.SetRules(faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpGet}, Prefix: state.IndexPath, Skip: 1, Limit: 1})
	if _, err := f.reconciler(t, nil).Reconcile(context.Background()); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("err %v", err)
	}
	if len(f.files(t)) != 0 {
		t.Fatal("published without a confirmed index")
	}
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
