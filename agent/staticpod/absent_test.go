// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// An absent index is empty desired state only for a node that never had
// one. Once this process read an index, or static Pods of an earlier run
// are on disk, a vanished index keeps every file and Service; the explicit
// empty index podmin delete leaves behind removes them.
func TestAbsentIndexIsEmptyOnlyForANewNode(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	r := f.reconciler(t, nil)
	if res := mustReconcile(t, r); res.Pods != 0 {
		t.Fatalf("a new cluster without an index: %+v", res)
	}
	f.deploy(t, "workers", "web", "web:v1", true)
	f.deploy(t, "workers", "api", "api:v1", false)
	mustReconcile(t, r)
	good := f.files(t)
	_, published := f.services.Last()

	// The index goes first, as when the bucket is emptied key by key.
	if err := f.bucket.Delete(ctx, state.IndexPath, ""); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		_, err := r.Reconcile(ctx)
		if !errors.Is(err, staticpod.ErrIndexMissing) || !strings.Contains(err.Error(), "keeping every published Pod and Service") {
			t.Fatalf("pass %d with the index vanished: err %v, want ErrIndexMissing", i, err)
		}
		if !equal(f.files(t), good) {
			t.Fatalf("pass %d with the index vanished changed the files: %q", i, names(f.files(t)))
		}
		if _, n := f.services.Last(); n != published {
			t.Fatalf("pass %d with the index vanished published Services", i)
		}
	}

	// A restarted agent remembers nothing, but the files are its record.
	_, err := f.reconciler(t, nil).Reconcile(ctx)
	if !errors.Is(err, staticpod.ErrIndexMissing) || !strings.Contains(err.Error(), "2 static Pod(s) published by an earlier run") {
		t.Fatalf("restarted agent: err %v, want ErrIndexMissing naming the published files", err)
	}
	if !equal(f.files(t), good) {
		t.Fatalf("the restarted agent changed the files: %q", names(f.files(t)))
	}

	// Deleting the last deployment leaves an explicit empty index: that
	// is nothing desired.
	f.deploy(t, "workers", "web", "web:v1", true)
	mustReconcile(t, r)
	f.remove(t, "workers", "web")
	obj, err := f.bucket.Get(ctx, state.IndexPath, objstore.GetOptions{})
	if err != nil || strings.TrimSpace(string(obj.Data)) != "{}" {
		t.Fatalf("index after deleting the last deployment = %q, %v; want {}", obj.Data, err)
	}
	mustReconcile(t, r)
	if got := visible(f.files(t)); len(got) != 0 {
		t.Fatalf("the explicit empty index left %q", names(got))
	}
	if svcs, _ := f.services.Last(); len(svcs) != 0 {
		t.Fatalf("the explicit empty index left Services %+v", svcs)
	}
	// Even with nothing published, an index this process read that
	// vanishes is reported, not read as a new cluster.
	if err := f.bucket.Delete(ctx, state.IndexPath, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx); !errors.Is(err, staticpod.ErrIndexMissing) {
		t.Fatalf("the empty index vanished: err %v, want ErrIndexMissing", err)
	}
}

// plainNotFound is a store that answers reads from a deleted bucket with a
// plain missing object, as some S3-compatible servers do.
type plainNotFound struct{ objstore.Store }

func (p plainNotFound) Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	obj, err := p.Store.Get(ctx, key, opts)
	if errors.Is(err, objstore.ErrBucketNotFound) {
		return obj, fmt.Errorf("%s: %w", key, objstore.ErrNotFound)
	}
	return obj, err
}

// A store that reports a deleted bucket as a plain missing index is asked
// whether the bucket exists: a node new or restarted, with or without
// files, reports the missing bucket and removes nothing.
func TestBucketMissingBehindPlainNotFound(t *testing.T) {
	ctx := context.Background()
	for _, earlier := range []bool{false, true} {
		t.Run(fmt.Sprintf("published_earlier=%v", earlier), func(t *testing.T) {
			f := newFixture(t)
			if earlier {
				f.deploy(t, "workers", "web", "web:v1", true)
				mustReconcile(t, f.reconciler(t, nil))
			}
			good := f.files(t)
			if err := os.Rename(f.bucket.Dir(), f.bucket.Dir()+".away"); err != nil {
				t.Fatal(err)
			}
			r, err := staticpod.New(staticpod.Options{
				Store: plainNotFound{f.bucket}, Cluster: "demo", NodeGroup: "workers", Root: f.root,
				Secrets: map[string]mounts.Reader{"local": f.secrets}, Publisher: f.services, BucketExists: f.bucket.BucketExists,
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Reconcile(ctx)
			if !errors.Is(err, staticpod.ErrBucketMissing) || errors.Is(err, staticpod.ErrIndexMissing) {
				t.Fatalf("err %v, want ErrBucketMissing", err)
			}
			if !equal(f.files(t), good) {
				t.Fatalf("files changed with the bucket missing: %q", names(f.files(t)))
			}
			if got := names(visible(f.files(t))); earlier != slices.Equal(got, []string{"web.yaml"}) {
				t.Fatalf("files %q", got)
			}
		})
	}
}
