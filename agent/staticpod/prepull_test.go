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
	err       error
	block     bool // wait for the deadline
	mu        sync.Mutex
	calls     [][]string
	fileThen  []string
}

func (p *fakePuller) Prepull(ctx context.Context, images []string) error {
	b, _ := os.ReadFile(filepath.Join(p.manifests, "web.yaml"))
	p.mu.Lock()
	p.calls = append(p.calls, slices.Clone(images))
	p.fileThen = append(p.fileThen, string(b))
	p.mu.Unlock()
	if p.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return p.err
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

// TestPrepullNeverHoldsPodsBack: a failing or hanging pre-pull is logged
// and the Pods are published all the same.
func TestPrepullNeverHoldsPodsBack(t *testing.T) {
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
