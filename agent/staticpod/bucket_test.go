// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"testing"

	"podmin.dev/podmin/internal/objstore"
)

// TestMissingBucketKeepsFiles checks that a bucket that disappears is an
// error, not an empty desired state: every published file stays, and the
// next pass after the bucket returns succeeds.
func TestMissingBucketKeepsFiles(t *testing.T) {
	f := newFixture(t)
	f.deploy(t, "workers", "web", "hello:v1", false)
	r := f.reconciler(t, nil)
	mustReconcile(t, r)
	before := f.files(t)
	if len(visible(before)) != 1 {
		t.Fatalf("published %v, want one static Pod", names(before))
	}
	moved := f.bucket.Dir() + ".away"
	if err := os.Rename(f.bucket.Dir(), moved); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := r.Reconcile(context.Background()); !errors.Is(err, objstore.ErrBucketNotFound) {
			t.Fatalf("Reconcile without the bucket error = %v, want ErrBucketNotFound", err)
		}
		if after := f.files(t); !maps.Equal(after, before) {
			t.Fatalf("files changed while the bucket was missing: %v, were %v", names(after), names(before))
		}
	}
	if err := os.Rename(moved, f.bucket.Dir()); err != nil {
		t.Fatal(err)
	}
	mustReconcile(t, r)
	if after := f.files(t); !maps.Equal(after, before) {
		t.Errorf("files after the bucket returned: %v, want %v", names(after), names(before))
	}
}
