// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
)

// requestCounter counts the requests of the last operation: every
// operation opens the bucket once, through a fresh counter.
type requestCounter struct{ last *faultstore.Store }

func (r *requestCounter) ResetCounts() { r.last = nil }

func (r *requestCounter) Counts() faultstore.Counts {
	if r.last == nil {
		return faultstore.Counts{}
	}
	return r.last.Counts()
}

// connectCounting connects env to a fresh bucket of provider and returns
// the request counter every later operation goes through.
func connectCounting(t *testing.T, env *Env, provider string) *requestCounter {
	t.Helper()
	counts := &requestCounter{}
	env.WrapStore = func(s objstore.Store) objstore.Store { counts.last = faultstore.New(s); return counts.last }
	bucket := "count-state"
	if provider == "local" {
		bucket = filepath.Join(t.TempDir(), "bucket")
	}
	if _, err := env.Connect(context.Background(), ConnectOptions{Cluster: "demo", Provider: provider, Bucket: bucket}); err != nil {
		t.Fatal(err)
	}
	return counts
}

func TestControlPathRequestsLocal(t *testing.T) { testControlPathRequests(t, testEnv(t), "local") }

func TestControlPathRequestsVersityGW(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a versitygw server: run without -short")
	}
	useVersityGW(t)
	testControlPathRequests(t, testEnv(t), "aws")
}

// testControlPathRequests counts the requests of deploy and list through
// the real operations: an identical re-deploy and a list of unchanged
// deployments with a warm cache are one request each.
func testControlPathRequests(t *testing.T, env *Env, provider string) {
	ctx := context.Background()
	counts := connectCounting(t, env, provider)
	const n = 5
	deploy := func(i int, image string) DeployResult {
		t.Helper()
		res, err := env.Deploy(ctx, DeployOptions{ManifestOptions: ManifestOptions{
			Name: fmt.Sprintf("app%d", i), NodeGroup: "workers", Images: []string{image}, Service: i == 0,
		}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for i := range n {
		counts.ResetCounts()
		deploy(i, "hello:v1")
		want := faultstore.Counts{Get: 1, PutIfMatch: 1, PutIfAbsent: 1}
		switch i {
		case 0: // first index, and a Service payload
			want = faultstore.Counts{Get: 1, PutIfAbsent: 3}
		}
		if c := counts.Counts(); c != want {
			t.Errorf("new deployment %d: requests %+v, want %+v", i, c, want)
		}
	}
	counts.ResetCounts()
	if res := deploy(0, "hello:v1"); res.Action != "unchanged" {
		t.Fatalf("re-deploy: %+v", res)
	}
	if c := counts.Counts(); c != (faultstore.Counts{Get: 1}) {
		t.Errorf("identical re-deploy: requests %+v, want one GET", c)
	}
	counts.ResetCounts()
	if res := deploy(1, "hello:v2"); res.Action != "updated" || res.ReplacedNamespace != "" {
		t.Fatalf("update: %+v", res)
	}
	if c := counts.Counts(); c != (faultstore.Counts{Get: 1, PutIfAbsent: 1, PutIfMatch: 1}) {
		t.Errorf("update: requests %+v, want 1 GET + 1 payload PUT + 1 index PUT", c)
	}
	list := func() []ListEntry {
		t.Helper()
		counts.ResetCounts()
		l, err := env.List(ctx)
		if err != nil || len(l) != n {
			t.Fatalf("list: %+v, %v", l, err)
		}
		for _, e := range l {
			if e.Error != "" || e.Namespace != "default" {
				t.Fatalf("list entry %+v", e)
			}
		}
		return l
	}
	list()
	if c := counts.Counts(); c != (faultstore.Counts{Get: 1}) {
		t.Errorf("list with a warm cache: requests %+v, want one GET", c)
	}
	if err := os.RemoveAll(filepath.Join(env.Dirs.Cache, "objects")); err != nil {
		t.Fatal(err)
	}
	list()
	if c := counts.Counts(); c != (faultstore.Counts{Get: 1 + n}) {
		t.Errorf("list with a cold cache: requests %+v, want the index and %d Pods", c, n)
	}
	list()
	if c := counts.Counts(); c != (faultstore.Counts{Get: 1}) {
		t.Errorf("list after the cache warmed: requests %+v, want one GET", c)
	}
}
