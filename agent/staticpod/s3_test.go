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
	"testing"

	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
	"podmin.dev/podmin/internal/state"
)

// On S3 (versitygw) too, a bucket that disappears is not empty desired
// state: the published files stay, the pass says the bucket is missing,
// and the node converges once it is back.
func TestMissingS3BucketKeepsThePublishedState(t *testing.T) {
	srv := objstoretest.StartVersityGW(t)
	bucket := s3storetest.NewBucket(t, srv)
	ctx := context.Background()
	deploy := func(name string) {
		data, err := manifest.Build(manifest.BuildOptions{Name: name, NodeGroup: "workers", Images: []string{name + ":v1"}})
		if err != nil {
			t.Fatal(err)
		}
		ex, err := manifest.Extract(data, manifest.ExtractOptions{})
		if err != nil {
			t.Fatal(err)
		}
		k, _ := state.NewKey("workers", name)
		if _, err := state.NewCommitter(bucket, state.CommitOptions{}).Deploy(ctx, state.Deployment{Key: k, Namespace: ex.Namespace, Pod: ex.PodYAML}); err != nil {
			t.Fatal(err)
		}
	}
	deploy("web")
	root := t.TempDir()
	r, err := staticpod.New(staticpod.Options{Store: bucket, Cluster: "demo", NodeGroup: "workers", Root: root, BucketExists: bucket.BucketExists})
	if err != nil {
		t.Fatal(err)
	}
	mustReconcile(t, r)
	manifests := filepath.Join(root, "etc", "podmin", "manifests")
	list := func() []string {
		entries, _ := os.ReadDir(manifests)
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	// versitygw's posix backend keeps a bucket as a directory.
	dir := filepath.Join(srv.Dir, bucket.Name())
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx); !errors.Is(err, staticpod.ErrBucketMissing) {
		t.Fatalf("err %v, want ErrBucketMissing", err)
	}
	if got := list(); !slices.Equal(got, []string{"web.yaml"}) {
		t.Fatalf("files with the bucket missing: %q", got)
	}
	if err := os.Rename(dir+".away", dir); err != nil {
		t.Fatal(err)
	}
	deploy("api")
	mustReconcile(t, r)
	if got := list(); !slices.Equal(got, []string{"api.yaml", "web.yaml"}) {
		t.Fatalf("after the bucket returned: %q", got)
	}
}
