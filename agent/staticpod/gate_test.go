// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/state"
)

// fakeGate admits updates while open and records every question.
type fakeGate struct {
	mu    sync.Mutex
	open  bool
	asked []staticpod.Update
}

func (g *fakeGate) Admit(_ context.Context, u staticpod.Update) (bool, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, u)
	if g.open {
		return true, ""
	}
	return false, "node-1 holds the only slot"
}

func (f *fixture) gated(t testing.TB, g staticpod.Gate, states func([]staticpod.DeploymentState)) *staticpod.Reconciler {
	t.Helper()
	r, err := staticpod.New(staticpod.Options{
		Store: f.store, Cluster: "demo", NodeGroup: "workers", Root: f.root,
		Secrets:   map[string]mounts.Reader{"local": f.secrets},
		Publisher: f.services, BucketExists: f.bucket.BucketExists, Gate: g,
		Hooks: staticpod.Hooks{Deployments: states},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The Gate decides when a running Pod gets its new revision: a new Pod
// and a deleted Pod never ask, a held update keeps the running file, its
// values and its Service, and the next pass asks again.
func TestGateHoldsARunningPodsNewRevision(t *testing.T) {
	f := newFixture(t)
	f.secrets.values["/demo/default/web/token"] = []byte("v1-token")
	g := &fakeGate{}
	var last []staticpod.DeploymentState
	r := f.gated(t, g, func(s []staticpod.DeploymentState) { last = s })
	v1 := f.deploy(t, "workers", "web", "hello:v1", true, "token")
	mustReconcile(t, r)
	if len(g.asked) != 0 {
		t.Fatalf("a new Pod asked the gate: %+v", g.asked)
	}
	if !strings.Contains(f.files(t)["web.yaml"], "hello:v1") {
		t.Fatal("web.yaml not written")
	}
	if len(last) != 1 || last[0].Applied != nodepod.Revision(v1) || last[0].Desired != last[0].Applied || last[0].AppliedAt.IsZero() ||
		last[0].Namespace != "default" || last[0].Service == nil || last[0].Service.Name != "web" {
		t.Fatalf("states after the first pass: %+v", last)
	}
	reads := f.secrets.reads

	v2 := f.deploy(t, "workers", "web", "hello:v2", true, "token")
	res := mustReconcile(t, r)
	if len(res.Held) != 1 || res.Held[0].Revision != nodepod.Revision(v2) || res.Held[0].Reason != "node-1 holds the only slot" {
		t.Fatalf("held = %+v", res.Held)
	}
	if got := f.files(t)["web.yaml"]; !strings.Contains(got, "hello:v1") {
		t.Fatalf("the held Pod's file changed:\n%s", got)
	}
	u := g.asked[0]
	if u.From != nodepod.Revision(v1) || u.To != nodepod.Revision(v2) || u.Service == nil || *u.Service != (state.ServiceID{Namespace: "default", Name: "web"}) || u.Pod != "web" {
		t.Fatalf("the gate was asked %+v", u)
	}
	if last[0].Waiting != "node-1 holds the only slot" || last[0].Applied != nodepod.Revision(v1) || last[0].Desired != nodepod.Revision(v2) {
		t.Fatalf("states while held: %+v", last)
	}
	published, _ := f.services.Last()
	if len(published) != 1 || published[0].Revision != nodepod.Revision(v1) {
		t.Fatalf("the held Pod's Service moved to the new revision: %+v", published)
	}
	fetched := f.secrets.reads
	if fetched == reads {
		t.Fatal("the new revision's values were not fetched")
	}

	// The next pass reads the index in full and asks again; the values of
	// the waiting revision are not fetched again.
	res = mustReconcile(t, r)
	if res.Unchanged || len(res.Held) != 1 || len(g.asked) != 2 || f.secrets.reads != fetched {
		t.Fatalf("second held pass: unchanged=%v held=%d asked=%d reads %d→%d", res.Unchanged, len(res.Held), len(g.asked), fetched, f.secrets.reads)
	}

	g.mu.Lock()
	g.open = true
	g.mu.Unlock()
	res = mustReconcile(t, r)
	if len(res.Held) != 0 || res.Written != 1 || !strings.Contains(f.files(t)["web.yaml"], "hello:v2") {
		t.Fatalf("admitted pass: %+v", res)
	}
	if last[0].Applied != nodepod.Revision(v2) || last[0].Waiting != "" {
		t.Fatalf("states after the update: %+v", last)
	}
	if res := mustReconcile(t, r); !res.Unchanged {
		t.Fatalf("the pass after the update was not idle: %+v", res)
	}

	// Deleting never asks.
	g.mu.Lock()
	g.open, g.asked = false, nil
	g.mu.Unlock()
	f.remove(t, "workers", "web")
	mustReconcile(t, r)
	if len(g.asked) != 0 || len(visible(f.files(t))) != 0 || len(last) != 0 {
		t.Fatalf("delete: asked %+v, files %v, states %+v", g.asked, names(f.files(t)), last)
	}
}

// Each failure is reported with its kind and the revision it is about.
func TestDeploymentStatesCarryErrors(t *testing.T) {
	f := newFixture(t)
	var last []staticpod.DeploymentState
	r := f.gated(t, nil, func(s []staticpod.DeploymentState) { last = s })
	e := f.deploy(t, "workers", "web", "hello:v1", false, "missing-key")
	_, err := r.Reconcile(context.Background())
	var pf *staticpod.PodsFailedError
	if !errors.As(err, &pf) {
		t.Fatalf("err = %v", err)
	}
	if len(last) != 1 || last[0].Error == nil || last[0].Error.Kind != state.ErrorSecret || last[0].Error.Revision != nodepod.Revision(e) || last[0].Applied != "" {
		t.Fatalf("states: %+v", last)
	}
	if pf.Failures[0].Kind != state.ErrorSecret {
		t.Fatalf("failure kind %q", pf.Failures[0].Kind)
	}
	f.secrets.values["/demo/default/web/missing-key"] = []byte("x")
	mustReconcile(t, r)
	if last[0].Error != nil || last[0].Applied != nodepod.Revision(e) {
		t.Fatalf("states after the fix: %+v", last)
	}
	if got := r.Deployments(); len(got) != 1 || got[0].Applied != last[0].Applied {
		t.Fatalf("Deployments() = %+v", got)
	}
}
