// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/objstore"
)

// One bad Pod never blocks its NodeGroup: beside a Pod carrying a
// 255-character value key (the longest the key rules allow) and a Pod whose
// payload is missing, every other Pod is published, stale files and their
// workload directories are removed, and Services are published.
func TestOneBadPodNeverBlocksTheNodeGroup(t *testing.T) {
	f := newFixture(t)
	long := strings.Repeat("k", 254) + "z"
	f.secrets.values["/demo/default/vault/"+long] = []byte("long key value")
	f.deploy(t, "workers", "stale", "stale:v1", true)
	r := f.reconciler(t, nil)
	mustReconcile(t, r)

	f.remove(t, "workers", "stale")
	f.deploy(t, "workers", "vault", "vault:v1", true, long)
	gone := f.deploy(t, "workers", "gone", "gone:v1", false)
	if err := os.Remove(filepath.Join(f.bucket.Dir(), filepath.FromSlash(gone.Pod))); err != nil {
		t.Fatal(err)
	}
	f.deploy(t, "workers", "web", "web:v1", true)

	res, err := r.Reconcile(context.Background())
	var pf *staticpod.PodsFailedError
	if !errors.As(err, &pf) || len(pf.Failures) != 1 || pf.Failures[0].Pod != "gone" || !strings.Contains(err.Error(), "pod gone (deployment workers/gone)") {
		t.Fatalf("err %v, want only gone reported", err)
	}
	if got := names(visible(f.files(t))); !slices.Equal(got, []string{"vault.yaml", "web.yaml"}) || res.Removed != 1 {
		t.Fatalf("static Pods %q (%+v), want vault and web published and stale removed", got, res)
	}
	value := filepath.Join(f.root, "run", "podmin", "workloads", "vault", "secrets", "local", long)
	if b, err := os.ReadFile(value); err != nil || string(b) != "long key value" {
		t.Fatalf("255-character key value: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(f.root, "run", "podmin", "workloads", "stale")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("workload directory of the deleted Pod: %v", err)
	}
	svcs, _ := f.services.Last()
	if len(svcs) != 2 || svcs[0].Pod != "vault" || svcs[1].Pod != "web" {
		t.Fatalf("services %+v, want vault's and web's", svcs)
	}
	for name := range f.files(t) {
		if strings.HasPrefix(name, ".") {
			t.Fatalf("temporary file %q left behind", name)
		}
	}
}

// A missing bucket is never empty desired state: every published Pod and
// Service stays, the pass fails naming the bucket, and the node recovers
// when the bucket returns. Neither is an index absent from an existing
// bucket once the node had one; an explicit empty index is.
func TestMissingBucketKeepsThePublishedState(t *testing.T) {
	f := newFixture(t)
	f.deploy(t, "workers", "web", "web:v1", true)
	r := f.reconciler(t, nil)
	mustReconcile(t, r)
	good := f.files(t)
	_, published := f.services.Last()

	moved := f.bucket.Dir() + ".away"
	if err := os.Rename(f.bucket.Dir(), moved); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		_, err := r.Reconcile(context.Background())
		if !errors.Is(err, staticpod.ErrBucketMissing) {
			t.Fatalf("pass %d with the bucket gone: err %v", i, err)
		}
		if !equal(f.files(t), good) {
			t.Fatalf("pass %d with the bucket gone changed the files: %q", i, names(f.files(t)))
		}
		if _, n := f.services.Last(); n != published {
			t.Fatalf("pass %d with the bucket gone published Services", i)
		}
	}
	if err := os.Rename(moved, f.bucket.Dir()); err != nil {
		t.Fatal(err)
	}
	f.deploy(t, "workers", "api", "api:v1", false)
	mustReconcile(t, r)
	if got := names(visible(f.files(t))); !slices.Equal(got, []string{"api.yaml", "web.yaml"}) {
		t.Fatalf("after the bucket returned: %q", got)
	}

	// The index removed from an existing bucket is no empty desired state
	// either: only an explicit empty index is.
	if err := os.Remove(filepath.Join(f.bucket.Dir(), "deployments", "index.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background()); !errors.Is(err, staticpod.ErrIndexMissing) {
		t.Fatalf("index removed: err %v, want ErrIndexMissing", err)
	}
	if got := names(visible(f.files(t))); !slices.Equal(got, []string{"api.yaml", "web.yaml"}) {
		t.Fatalf("index removed: %q", got)
	}
	if _, err := f.bucket.Put(context.Background(), "deployments/index.json", []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	mustReconcile(t, r)
	if got := visible(f.files(t)); len(got) != 0 {
		t.Fatalf("an explicit empty index left %q", names(got))
	}
}

// getRecorder records the keys read whole, and the keys whose streamed
// body was read at all.
type getRecorder struct {
	objstore.Store
	mu   sync.Mutex
	gets []string
}

func (g *getRecorder) Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	g.record(key)
	return g.Store.Get(ctx, key, opts)
}

func (g *getRecorder) record(key string) {
	g.mu.Lock()
	g.gets = append(g.gets, key)
	g.mu.Unlock()
}

func (g *getRecorder) Open(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	r, err := g.Store.(objstore.Streamer).Open(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	r.ReadCloser = &bodyRecorder{ReadCloser: r.ReadCloser, read: func() { g.record(key) }}
	return r, nil
}

func (g *getRecorder) Write(ctx context.Context, key string, body io.Reader, size int64, opts objstore.PutOptions) (string, error) {
	return g.Store.(objstore.Streamer).Write(ctx, key, body, size, opts)
}

// bodyRecorder reports the first read of a streamed body.
type bodyRecorder struct {
	io.ReadCloser
	read func()
	once sync.Once
}

func (b *bodyRecorder) Read(p []byte) (int, error) {
	b.once.Do(b.read)
	return b.ReadCloser.Read(p)
}

// An oversized payload is refused by its size before it is read, and so is
// an oversized index after one read.
func TestOversizedObjectsAreRefused(t *testing.T) {
	f := newFixture(t)
	e := f.deploy(t, "workers", "web", "web:v1", false)
	if err := os.WriteFile(filepath.Join(f.bucket.Dir(), filepath.FromSlash(e.Pod)), make([]byte, staticpod.MaxPayloadBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &getRecorder{Store: f.bucket}
	r, err := staticpod.New(staticpod.Options{Store: rec, Cluster: "demo", NodeGroup: "workers", Root: f.root})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background()); !errors.Is(err, staticpod.ErrTooLarge) {
		t.Fatalf("err %v, want ErrTooLarge", err)
	}
	if slices.Contains(rec.gets, e.Pod) {
		t.Fatalf("the oversized payload was read: %q", rec.gets)
	}
	big := append([]byte(`{"workers/x":{"pod":"`), make([]byte, staticpod.MaxIndexBytes)...)
	if _, err := f.bucket.Put(context.Background(), "deployments/index.json", big); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background()); !errors.Is(err, staticpod.ErrTooLarge) {
		t.Fatalf("oversized index: err %v, want ErrTooLarge", err)
	}
}
