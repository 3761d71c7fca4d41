// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/state"
)

// fakeSecrets is an in-memory mounts.Reader that counts reads.
type fakeSecrets struct {
	mu     sync.Mutex
	values map[string][]byte
	fail   error
	reads  int
}

func (f *fakeSecrets) Get(_ context.Context, name string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.fail != nil {
		return nil, f.fail
	}
	v, ok := f.values[name]
	if !ok {
		return nil, errors.New("secret not found")
	}
	return v, nil
}

type fixture struct {
	bucket   *local.Bucket
	store    *faultstore.Store
	root     string
	secrets  *fakeSecrets
	services *staticpod.Recorder
}

func newFixture(t testing.TB) *fixture {
	dir := t.TempDir()
	b := local.Open(filepath.Join(dir, "bucket"))
	if err := b.CreateBucket(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &fixture{
		bucket: b, store: faultstore.New(b), root: filepath.Join(dir, "root"),
		secrets:  &fakeSecrets{values: map[string][]byte{}},
		services: &staticpod.Recorder{},
	}
}

// reconciler is a fresh agent process's reconciler for NodeGroup workers.
func (f *fixture) reconciler(t testing.TB, step func(staticpod.Step, string) error) *staticpod.Reconciler {
	t.Helper()
	return f.reconcilerWith(t, step, nil)
}

// reconcilerWith is reconciler with workload identities (nil: none).
func (f *fixture) reconcilerWith(t testing.TB, step func(staticpod.Step, string) error, id staticpod.Identity) *staticpod.Reconciler {
	t.Helper()
	r, err := staticpod.New(staticpod.Options{
		Store: f.store, Cluster: "demo", NodeGroup: "workers", Root: f.root,
		Secrets:   map[string]mounts.Reader{"local": f.secrets},
		Publisher: f.services, Step: step, BucketExists: f.bucket.BucketExists,
		Identity: id,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// builtDeployment builds a deployment with opts and extracts it ready to
// commit.
func builtDeployment(t testing.TB, ng, name string, opts manifest.BuildOptions) state.Deployment {
	t.Helper()
	data, err := manifest.Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := manifest.Extract(data, manifest.ExtractOptions{Name: name, NodeGroup: ng})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := state.NewKey(ng, name)
	d := state.Deployment{Key: k, Namespace: ex.Namespace, Pod: ex.PodYAML}
	if ex.Service != nil {
		d.ServiceName, d.Service = ex.Service.Name, ex.ServiceYAML
	}
	return d
}

// deploy commits a built-in deployment straight to the bucket.
func (f *fixture) deploy(t testing.TB, ng, name, image string, service bool, secrets ...string) state.Entry {
	t.Helper()
	opts := manifest.BuildOptions{Name: name, NodeGroup: ng, Images: []string{image}, Service: service, Secrets: secrets}
	if len(secrets) > 0 {
		opts.SecretsProvider = "local"
	}
	d := builtDeployment(t, ng, name, opts)
	res, err := state.NewCommitter(f.bucket, state.CommitOptions{}).Deploy(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	return res.Entry
}

func (f *fixture) remove(t testing.TB, ng, name string) {
	t.Helper()
	k, _ := state.NewKey(ng, name)
	if _, err := state.NewCommitter(f.bucket, state.CommitOptions{}).Delete(context.Background(), k); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) manifests() string { return filepath.Join(f.root, "etc", "podmin", "manifests") }

// files returns every entry of the manifests directory with its content.
func (f *fixture) files(t testing.TB) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(f.manifests())
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(f.manifests(), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// visible returns the *.yaml files kubelet would read.
func visible(files map[string]string) map[string]string {
	out := map[string]string{}
	for n, c := range files {
		if strings.HasSuffix(n, ".yaml") && !strings.HasPrefix(n, ".") {
			out[n] = c
		}
	}
	return out
}

func names(m map[string]string) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func mustReconcile(t testing.TB, r *staticpod.Reconciler) staticpod.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}
