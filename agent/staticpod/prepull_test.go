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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/agent/staticpod"
)

// fakePuller records each pre-pull with the web Pod's file as it was at
// that moment.
type fakePuller struct {
	manifests string
	err       error // of the runtime as a whole
	block     bool  // wait for the deadline
	// missing are images that cannot be pulled, with their error.
	missing  map[string]error
	mu       sync.Mutex
	calls    [][]string
	fileThen []string
}

func (p *fakePuller) Prepull(ctx context.Context, images []string) (map[string]error, error) {
	b, _ := os.ReadFile(filepath.Join(p.manifests, "web.yaml"))
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, slices.Clone(images))
	p.fileThen = append(p.fileThen, string(b))
	if p.block {
		<-ctx.Done()
		failed := map[string]error{}
		for _, img := range images {
			failed[img] = ctx.Err()
		}
		return failed, nil
	}
	failed := map[string]error{}
	for _, img := range images {
		if err := p.missing[img]; err != nil {
			failed[img] = err
		}
	}
	return failed, p.err
}

func (f *fixture) pullingReconciler(t *testing.T, p *fakePuller, timeout time.Duration) *staticpod.Reconciler {
	t.Helper()
	r, err := staticpod.New(staticpod.Options{
		Store: f.store, Cluster: "demo", NodeGroup: "workers", Root: f.root,
		Secrets:   map[string]mounts.Reader{"local": f.secrets},
		Publisher: f.services, BucketExists: f.bucket.BucketExists,
		Prepull: p, PrepullTimeout: timeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPrepullBeforeTheFileChanges: a pass pre-pulls exactly the images it
// adds to the node while the Pod's file still names the old one, and a
// pass that adds no image pulls nothing.
func TestPrepullBeforeTheFileChanges(t *testing.T) {
	f := newFixture(t)
	p := &fakePuller{manifests: f.manifests()}
	r := f.pullingReconciler(t, p, 0)
	f.deploy(t, "workers", "web", "hello:v1", true)
	f.deploy(t, "workers", "api", "api:v1", false)
	mustReconcile(t, r)
	if len(p.calls) != 1 || !slices.Equal(p.calls[0], []string{"registry.podmin.internal/apps/api:v1", "registry.podmin.internal/apps/hello:v1"}) {
		t.Fatalf("first pass pre-pulled %q", p.calls)
	}
	if p.fileThen[0] != "" {
		t.Fatal("web.yaml existed before its image was pre-pulled")
	}

	f.deploy(t, "workers", "web", "hello:v2", true)
	mustReconcile(t, r)
	if len(p.calls) != 2 || !slices.Equal(p.calls[1], []string{"registry.podmin.internal/apps/hello:v2"}) {
		t.Fatalf("update pre-pulled %q, want only hello:v2", p.calls)
	}
	if !strings.Contains(p.fileThen[1], "apps/hello:v1") {
		t.Fatalf("web.yaml changed before hello:v2 was pre-pulled:\n%s", p.fileThen[1])
	}
	if !strings.Contains(f.files(t)["web.yaml"], "apps/hello:v2") {
		t.Fatal("web.yaml was not updated after the pre-pull")
	}

	// A full pass that changes no image, and removing a Pod, pull nothing.
	r.IdentityChanged()
	mustReconcile(t, r)
	f.remove(t, "workers", "api")
	mustReconcile(t, r)
	if len(p.calls) != 2 {
		t.Fatalf("passes without new images pre-pulled %q", p.calls[2:])
	}
}

// TestPrepullNeverHoldsNewPodsBack: a new Pod has no running revision to
// keep, so a failing or hanging pre-pull is logged and the Pod is
// published all the same; kubelet pulls it.
func TestPrepullNeverHoldsNewPodsBack(t *testing.T) {
	for name, p := range map[string]*fakePuller{
		"failing":    {err: errors.New("registry unreachable")},
		"hanging":    {block: true},
		"no runtime": {err: fmt.Errorf("%w: no socket", staticpod.ErrNoRuntime)},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			p.manifests = f.manifests()
			r := f.pullingReconciler(t, p, 50*time.Millisecond)
			f.deploy(t, "workers", "web", "hello:v1", true)
			res := mustReconcile(t, r)
			if len(p.calls) != 1 || res.Written != 1 || len(res.Failed) != 0 {
				t.Fatalf("calls %q, result %+v", p.calls, res)
			}
			if !strings.Contains(f.files(t)["web.yaml"], "apps/hello:v1") {
				t.Fatal("web.yaml was not written")
			}
		})
	}
}

// TestFailedPrepullKeepsTheRunningRevision: a new revision whose image
// cannot be pulled (never pushed, damaged, no space, runtime down, too
// slow) leaves the running revision's file, values and Service in place,
// is reported as an image failure of the new revision naming the image
// and what to do, and is applied by a later pass once the image pulls.
// Other Pods of the pass proceed; without a runtime nothing is held.
func TestFailedPrepullKeepsTheRunningRevision(t *testing.T) {
	const v2 = "registry.podmin.internal/apps/hello:v2"
	for name, tc := range map[string]struct {
		puller *fakePuller
		want   string
	}{
		"never pushed": {&fakePuller{missing: map[string]error{v2: errors.New("pull " + v2 + ": not found")}}, "push the image"},
		"disk full":    {&fakePuller{missing: map[string]error{v2: errors.New("write /var/lib/containerd/x: no space left on device")}}, "the node's disk is full"},
		"runtime down": {&fakePuller{err: errors.New("connection refused")}, "connection refused"},
		"too slow":     {&fakePuller{block: true}, "deadline exceeded"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			p := tc.puller
			p.manifests = f.manifests()
			r := f.pullingReconciler(t, p, 50*time.Millisecond)
			f.deploy(t, "workers", "web", "hello:v1", true)
			mustReconcile(t, r)
			before := f.files(t)["web.yaml"]
			servicesBefore, _ := f.services.Last()

			f.deploy(t, "workers", "web", "hello:v2", true)
			f.deploy(t, "workers", "api", "api:v1", false)
			res, err := r.Reconcile(context.Background())
			var pf *staticpod.PodsFailedError
			if !errors.As(err, &pf) || len(pf.Failures) != 1 || pf.Failures[0].Kind != "image" || pf.Failures[0].Pod != "web" {
				t.Fatalf("pass: %v, want web kept back by its image", err)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, "keeps serving") {
				t.Fatalf("error %q does not say %q and that the running revision keeps serving", msg, tc.want)
			}
			if got := f.files(t)["web.yaml"]; got != before {
				t.Fatalf("web.yaml changed although hello:v2 could not be pulled:\n%s", got)
			}
			if _, ok := f.files(t)["api.yaml"]; !ok || res.Written != 1 {
				t.Fatalf("the other Pod was not published: written %d", res.Written)
			}
			if got, _ := f.services.Last(); len(got) != len(servicesBefore) || got[0].Revision != servicesBefore[0].Revision {
				t.Fatalf("web's Service changed to %+v although its Pod kept its revision", got)
			}
			states := r.Deployments()
			i := slices.IndexFunc(states, func(s staticpod.DeploymentState) bool { return s.Deployment.Name == "web" })
			if i < 0 || states[i].Error == nil || states[i].Error.Kind != "image" || states[i].Error.Revision != states[i].Desired ||
				states[i].Applied == states[i].Desired {
				t.Fatalf("web's state %+v, want an image error for the desired revision, the old one applied", states[i])
			}

			// The image appears: the next pass applies the revision.
			p.mu.Lock()
			p.missing, p.err, p.block = nil, nil, false
			p.mu.Unlock()
			if _, err := r.Reconcile(context.Background()); err != nil {
				t.Fatalf("pass after the image appeared: %v", err)
			}
			if !strings.Contains(f.files(t)["web.yaml"], "apps/hello:v2") {
				t.Fatal("web.yaml was not updated once hello:v2 could be pulled")
			}
		})
	}
}
