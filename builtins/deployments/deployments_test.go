// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deployments

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ctxops "podmin.dev/podmin/builtins/contexts"
	"podmin.dev/podmin/builtins/manifests"
	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/builtins/openv/openvtest"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/objstore/objstoretest"
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
func connectCounting(t *testing.T, env *openv.Env, provider string) *requestCounter {
	t.Helper()
	counts := &requestCounter{}
	env.WrapStore = func(s objstore.Store) objstore.Store { counts.last = faultstore.New(s); return counts.last }
	bucket := "count-state"
	if provider == "local" {
		bucket = filepath.Join(t.TempDir(), "bucket")
	}
	if _, err := ctxops.Connect(context.Background(), env, ctxops.ConnectOptions{Cluster: "demo", Provider: provider, Bucket: bucket}); err != nil {
		t.Fatal(err)
	}
	return counts
}

func TestControlPathRequestsLocal(t *testing.T) {
	testControlPathRequests(t, openvtest.NewEnv(t), "local")
}

func TestControlPathRequestsVersityGW(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a versitygw server: run without -short")
	}
	objstoretest.UseVersityGW(t)
	testControlPathRequests(t, openvtest.NewEnv(t), "aws")
}

// testControlPathRequests counts the requests of deploy and list through
// the real operations: with a warm cache an identical re-deploy is the
// index read and a HEAD per payload, after the deploy checks' two reads
// (the cluster configuration and the image's repository index), and a
// list is the index read and one LIST per NodeGroup (and one of the
// Service payloads).
func testControlPathRequests(t *testing.T, env *openv.Env, provider string) {
	ctx := context.Background()
	counts := connectCounting(t, env, provider)
	const n = 5
	const checks = 2 // the cluster configuration, the image's repository index
	deploy := func(i int, image string) DeployResult {
		t.Helper()
		res, err := Deploy(ctx, env, DeployOptions{ManifestOptions: manifests.ManifestOptions{
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
		// The checks read the cluster configuration and the image index;
		// the index write is followed by the NodeGroup view's.
		want := faultstore.Counts{Get: checks + 1, PutIfMatch: 1, PutIfAbsent: 1, Put: 1}
		switch i {
		case 0: // first index, and a Service payload; the absent index
			// costs a LIST of one key under the views, which proves the
			// cluster new
			want = faultstore.Counts{Get: checks + 1, PutIfAbsent: 3, Put: 1, List: 1}
		}
		if c := counts.Counts(); c != want {
			t.Errorf("new deployment %d: requests %+v, want %+v", i, c, want)
		}
	}
	counts.ResetCounts()
	if res := deploy(0, "hello:v1"); res.Action != "unchanged" {
		t.Fatalf("re-deploy: %+v", res)
	}
	if c := counts.Counts(); c != (faultstore.Counts{Get: checks + 1, Head: 2}) {
		t.Errorf("identical re-deploy: requests %+v, want the checks' GETs, one GET and a HEAD per payload", c)
	}
	counts.ResetCounts()
	if res := deploy(1, "hello:v2"); res.Action != "updated" || res.ReplacedNamespace != "" {
		t.Fatalf("update: %+v", res)
	}
	if c := counts.Counts(); c != (faultstore.Counts{Get: checks + 1, PutIfAbsent: 1, PutIfMatch: 1, Put: 1}) {
		t.Errorf("update: requests %+v, want the checks' GETs + 1 GET + 1 payload PUT + 1 index PUT + 1 view PUT", c)
	}
	list := func() []ListEntry {
		t.Helper()
		counts.ResetCounts()
		l, err := List(ctx, env)
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
	// One NodeGroup, and one deployment with a Service: the index, one
	// LIST of the NodeGroup's Pods and one of the Services.
	warm := faultstore.Counts{Get: 1, List: 2}
	list()
	if c := counts.Counts(); c != warm {
		t.Errorf("list with a warm cache: requests %+v, want %+v", c, warm)
	}
	if err := os.RemoveAll(filepath.Join(env.Dirs.Cache, "objects")); err != nil {
		t.Fatal(err)
	}
	list()
	if c := counts.Counts(); c != (faultstore.Counts{Get: 1 + n + 1, List: 2}) {
		t.Errorf("list with a cold cache: requests %+v, want the index, %d Pods and the Service, and the LISTs", c, n)
	}
	list()
	if c := counts.Counts(); c != warm {
		t.Errorf("list after the cache warmed: requests %+v, want %+v", c, warm)
	}
	// A second NodeGroup costs one more LIST.
	if _, err := Deploy(ctx, env, DeployOptions{ManifestOptions: manifests.ManifestOptions{Name: "edge", NodeGroup: "edge", Images: []string{"hello:v1"}}}); err != nil {
		t.Fatal(err)
	}
	counts.ResetCounts()
	if l, err := List(ctx, env); err != nil || len(l) != n+1 {
		t.Fatalf("list: %+v, %v", l, err)
	}
	if c := counts.Counts(); c != (faultstore.Counts{Get: 1, List: 3}) {
		t.Errorf("list of two NodeGroups with a warm cache: requests %+v, want 1 GET and 3 LISTs", c)
	}
}

func TestMissingOrChangedPayloadsLocal(t *testing.T) {
	testMissingOrChangedPayloads(t, openvtest.NewEnv(t), "local")
}

func TestMissingOrChangedPayloadsVersityGW(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a versitygw server: run without -short")
	}
	objstoretest.UseVersityGW(t)
	testMissingOrChangedPayloads(t, openvtest.NewEnv(t), "aws")
}

// testMissingOrChangedPayloads removes and damages payloads in the bucket
// behind a warm cache: list and preview report them (the cache vouches
// only for objects still carrying the stamp it verified), and an
// identical re-deploy repairs them instead of reporting unchanged.
func testMissingOrChangedPayloads(t *testing.T, env *openv.Env, provider string) {
	ctx := context.Background()
	connectCounting(t, env, provider)
	web, err := Deploy(ctx, env, DeployOptions{ManifestOptions: manifests.ManifestOptions{Name: "web", NodeGroup: "workers", Images: []string{"hello:v1"}, Service: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Deploy(ctx, env, DeployOptions{ManifestOptions: manifests.ManifestOptions{Name: "api", NodeGroup: "workers", Images: []string{"hello:v1"}}}); err != nil {
		t.Fatal(err)
	}
	_, store, err := env.OpenCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rowErrors := func() map[string]string {
		t.Helper()
		l, err := List(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, e := range l {
			out[e.Name] = e.Error
		}
		return out
	}
	if errs := rowErrors(); errs["web"] != "" || errs["api"] != "" {
		t.Fatalf("list before any damage: %v", errs)
	}
	redeploy := func(want string, repaired ...string) {
		t.Helper()
		res, err := Deploy(ctx, env, DeployOptions{ManifestOptions: manifests.ManifestOptions{Name: "web", NodeGroup: "workers", Images: []string{"hello:v1"}, Service: true}})
		if err != nil || res.Action != want || !slices.Equal(res.Repaired, repaired) {
			t.Fatalf("re-deploy: %+v, %v; want %s repairing %q", res, err, want, repaired)
		}
	}
	for _, damage := range []struct {
		name, path, want string
		do               func(p string) error
	}{
		{"missing Pod", web.Pod, "is not in the bucket", func(p string) error { return store.Delete(ctx, p, "") }},
		{"corrupt Pod", web.Pod, "does not match", func(p string) error { _, err := store.Put(ctx, p, []byte("bit rot")); return err }},
		{"missing Service", web.ServicePath, "is not in the bucket", func(p string) error { return store.Delete(ctx, p, "") }},
		{"corrupt Service", web.ServicePath, "does not match", func(p string) error { _, err := store.Put(ctx, p, []byte("bit rot")); return err }},
	} {
		t.Run(damage.name, func(t *testing.T) {
			if err := damage.do(damage.path); err != nil {
				t.Fatal(err)
			}
			errs := rowErrors()
			if !strings.Contains(errs["web"], damage.path) || !strings.Contains(errs["web"], damage.want) || errs["api"] != "" {
				t.Errorf("list after %s: %v", damage.name, errs)
			}
			if _, err := Preview(ctx, env, PreviewOptions{NodeGroup: "workers"}); err == nil || !strings.Contains(err.Error(), damage.want) {
				t.Errorf("preview after %s: %v", damage.name, err)
			}
			redeploy("repaired", damage.path)
			if errs := rowErrors(); errs["web"] != "" {
				t.Errorf("list after the repair: %v", errs)
			}
			if _, err := Preview(ctx, env, PreviewOptions{NodeGroup: "workers"}); err != nil {
				t.Errorf("preview after the repair: %v", err)
			}
			redeploy("unchanged")
		})
	}
}
