// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"context"
	"path/filepath"
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/state"
)

// Deleting the last deployment leaves the index object in place as an
// explicit empty index ({}), never removes it: node agents read an absent
// index after they had one as a bucket being deleted and keep their Pods,
// so "nothing desired" must be said by an object.
func TestDeletingTheLastDeploymentLeavesAnEmptyIndex(t *testing.T) {
	ctx := context.Background()
	b := local.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := b.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	c := state.NewCommitter(b, state.CommitOptions{})
	pod := []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\nspec:\n  containers:\n  - image: web:v1\n    name: web\n")
	k := state.Key{NodeGroup: "workers", Name: "web"}
	if _, err := c.Deploy(ctx, state.Deployment{Key: k, Namespace: "default", Pod: pod}); err != nil {
		t.Fatal(err)
	}
	before, err := b.Get(ctx, state.IndexPath, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Delete(ctx, k)
	if err != nil || res.Outcome != state.Deleted {
		t.Fatalf("delete = %+v, %v", res, err)
	}
	obj, err := b.Get(ctx, state.IndexPath, objstore.GetOptions{})
	if err != nil {
		t.Fatalf("the index object after deleting the last deployment: %v", err)
	}
	if string(obj.Data) != "{}\n" || obj.ETag == before.ETag {
		t.Fatalf("index after deleting the last deployment = %q at %s (was %s), want a new {}", obj.Data, obj.ETag, before.ETag)
	}
	ix, err := state.DecodeIndex(obj.Data)
	if err != nil || ix.Len() != 0 {
		t.Fatalf("decoded: %d entries, %v", ix.Len(), err)
	}
	// Deleting it again writes nothing and still leaves the object.
	if res, err := c.Delete(ctx, k); err != nil || res.Outcome != state.Absent {
		t.Fatalf("second delete = %+v, %v", res, err)
	}
	if again, err := b.Get(ctx, state.IndexPath, objstore.GetOptions{}); err != nil || again.ETag != obj.ETag {
		t.Fatalf("the index after a second delete: %s, %v; want it unchanged at %s", again.ETag, err, obj.ETag)
	}
}
