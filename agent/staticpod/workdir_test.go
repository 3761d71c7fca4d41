// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/agent/workload"
	"podmin.dev/podmin/internal/pki"
)

// testIdentities is an agent's workload identity manager over the
// fixture's bucket and root; it is the leader, so it creates the CA.
func testIdentities(t testing.TB, f *fixture) *workload.Manager {
	t.Helper()
	v, err := pki.GenerateWorkloadKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := pki.ParseWorkloadKey(v)
	if err != nil {
		t.Fatal(err)
	}
	m, err := workload.New(workload.Options{Store: f.bucket, Cluster: "demo", Root: f.root, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return m
}

// mountsReady fails the test unless every host directory kubelet's
// hostPath volumes of the Pod need exists as a directory: the identity
// (through its symlink, with the three files) and the values.
func (f *fixture) mountsReady(t *testing.T, pod string, providers ...string) {
	t.Helper()
	dir := filepath.Join(f.root, "run/podmin/workloads", pod)
	for _, name := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if fi, err := os.Stat(filepath.Join(dir, "identity", name)); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("Pod %s: identity/%s: %v: kubelet would refuse its hostPath volume", pod, name, err)
		}
	}
	for _, p := range providers {
		if fi, err := os.Stat(filepath.Join(dir, "secrets", p)); err != nil || !fi.IsDir() {
			t.Fatalf("Pod %s: secrets/%s: %v: kubelet would refuse its hostPath volume", pod, p, err)
		}
	}
}

// Deleting a deployment and deploying the same name again gives its Pod a
// workload directory again: identity and values exist before its file is
// written, whatever the agent remembered of the Pod it deleted.
func TestDeleteThenDeployTheSameNameRecreatesItsMounts(t *testing.T) {
	for _, sameRevision := range []bool{true, false} {
		name := "new-image"
		if sameRevision {
			name = "same-revision"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.secrets.values["/demo/default/web/token"] = []byte("s3cret")
			r := f.reconcilerWith(t, nil, testIdentities(t, f))
			f.deploy(t, "workers", "web", "registry.podmin.internal/apps/hello:v1", true, "token")
			f.deploy(t, "workers", "api", "registry.podmin.internal/apps/hello:v1", false)
			mustReconcile(t, r)
			f.mountsReady(t, "web", "local")

			f.remove(t, "workers", "web")
			mustReconcile(t, r)
			if _, err := os.Lstat(filepath.Join(f.root, "run/podmin/workloads/web")); !os.IsNotExist(err) {
				t.Fatalf("the workload directory of the deleted Pod: %v, want it removed", err)
			}
			image := "registry.podmin.internal/apps/hello:v2"
			if sameRevision {
				image = "registry.podmin.internal/apps/hello:v1"
			}
			f.deploy(t, "workers", "web", image, true, "token")
			res := mustReconcile(t, r)
			if res.Written != 1 {
				t.Fatalf("the redeployed Pod: %d files written, want 1", res.Written)
			}
			f.mountsReady(t, "web", "local")
			f.mountsReady(t, "api")
			b, err := os.ReadFile(filepath.Join(f.root, "run/podmin/workloads/web/secrets/local/token"))
			if err != nil || string(b) != "s3cret" {
				t.Fatalf("the redeployed Pod's value: %q, %v", b, err)
			}
		})
	}
}

// A workload directory that disappears under a running agent (a wiped
// tmpfs, an operator's rm) is written again by the next pass that
// touches the Pod: neither the identity cache nor the record of loaded
// values vouches for files nobody checked.
func TestVanishedWorkloadDirectoryIsWrittenAgain(t *testing.T) {
	f := newFixture(t)
	f.secrets.values["/demo/default/web/token"] = []byte("s3cret")
	ids := testIdentities(t, f)
	r := f.reconcilerWith(t, nil, ids)
	f.deploy(t, "workers", "web", "registry.podmin.internal/apps/hello:v1", true, "token")
	mustReconcile(t, r)
	before := f.files(t)["web.yaml"]
	if err := os.RemoveAll(filepath.Join(f.root, "run/podmin/workloads/web")); err != nil {
		t.Fatal(err)
	}
	r.IdentityChanged() // what the identity loop asks for: a forced pass
	if _, err := r.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.mountsReady(t, "web", "local")
	after := f.files(t)["web.yaml"]
	if before == after {
		t.Fatal("a new leaf was written but the Pod's file still names the old identity revision")
	}
	if !strings.Contains(after, workload.RevisionAnnotation) {
		t.Fatalf("web.yaml has no %s", workload.RevisionAnnotation)
	}
}

// A Pod whose hostPath directories cannot be made is not published: its
// last valid file stays, and the failure names the path.
func TestPodIsNotPublishedWithoutItsMounts(t *testing.T) {
	f := newFixture(t)
	r := f.reconciler(t, nil)
	f.deploy(t, "workers", "web", "registry.podmin.internal/apps/hello:v1", false)
	// A file where the Pod's workload directory belongs: nothing can be
	// created beneath it.
	dir := filepath.Join(f.root, "run/podmin/workloads")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "web"), []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := r.Reconcile(context.Background())
	var failed *staticpod.PodsFailedError
	if err == nil || !errors.As(err, &failed) || !strings.Contains(err.Error(), "run/podmin/workloads/web") {
		t.Fatalf("pass: %v, want the Pod kept back naming its workload directory", err)
	}
	if _, ok := f.files(t)["web.yaml"]; ok {
		t.Fatal("web.yaml was published although its identity directory does not exist")
	}
}

// A Pod that returns to a revision it ran before (a rollback, or a delete
// and the same deploy again) gets a file kubelet has not seen, so kubelet
// starts it as a new Pod instead of counting the old run's containers as
// its restarts; an agent restart rewrites nothing.
func TestReturningRevisionIsANewPodToKubelet(t *testing.T) {
	f := newFixture(t)
	r := f.reconciler(t, nil)
	f.deploy(t, "workers", "web", "hello:v1", false)
	mustReconcile(t, r)
	first := f.files(t)["web.yaml"]
	if !strings.Contains(first, "podmin.dev/incarnation: ") {
		t.Fatalf("web.yaml has no incarnation:\n%s", first)
	}
	if res := mustReconcile(t, f.reconciler(t, nil)); res.Written != 0 || f.files(t)["web.yaml"] != first {
		t.Fatalf("a restarted agent rewrote web.yaml (%d written)", res.Written)
	}
	f.deploy(t, "workers", "web", "hello:v2", false)
	mustReconcile(t, r)
	f.deploy(t, "workers", "web", "hello:v1", false)
	mustReconcile(t, r)
	rolledBack := f.files(t)["web.yaml"]
	if rolledBack == first || !equal(withoutIncarnation(map[string]string{"f": rolledBack}), withoutIncarnation(map[string]string{"f": first})) {
		t.Fatalf("rolled back to hello:v1: the file is the first run's, or differs in more than its incarnation:\n%s\n---\n%s", first, rolledBack)
	}
	f.remove(t, "workers", "web")
	mustReconcile(t, r)
	f.deploy(t, "workers", "web", "hello:v1", false)
	mustReconcile(t, r)
	if again := f.files(t)["web.yaml"]; again == rolledBack || again == first {
		t.Fatal("deleted and deployed again: the file is one kubelet ran before")
	}
}

// noCA is an Identity whose workload CA has not been read yet.
type noCA struct{}

func (noCA) AnnotatePod(context.Context, []byte) ([]byte, workload.Identity, error) {
	return nil, workload.Identity{}, fmt.Errorf("%w: identity/ca.json does not exist yet", workload.ErrNoCA)
}
func (noCA) Forget([]string) error { return nil }

// A node that has just started and cannot read the workload CA yet (the
// leader creates it) reports its Pods as starting, not failed, for
// StartupGrace; past it the same is an identity error.
func TestIdentityWithoutCAIsStartingAtFirst(t *testing.T) {
	f := newFixture(t)
	now := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
	r, err := staticpod.New(staticpod.Options{Store: f.store, Cluster: "demo", NodeGroup: "workers", Root: f.root,
		BucketExists: f.bucket.BucketExists, Identity: noCA{}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	f.deploy(t, "workers", "web", "hello:v1", false)
	_, _ = r.Reconcile(context.Background())
	st := r.Deployments()
	if len(st) != 1 || st[0].Error != nil || !strings.HasPrefix(st[0].Starting, "starting: the workload CA is not readable yet") {
		t.Fatalf("within the grace: %+v, want starting and no error", st)
	}
	now = now.Add(staticpod.StartupGrace)
	r.IdentityChanged()
	_, _ = r.Reconcile(context.Background())
	st = r.Deployments()
	if len(st) != 1 || st[0].Starting != "" || st[0].Error == nil || st[0].Error.Kind != "identity" {
		t.Fatalf("past the grace: %+v, want an identity error", st)
	}
}
