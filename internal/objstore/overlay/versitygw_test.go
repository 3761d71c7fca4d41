// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package overlay_test

import (
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/overlay"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
)

// TestConformanceOverS3 holds the overlay to the objstore contract over a
// real S3 server whose bucket holds objects the overlay has deleted, so
// reads fall through to real S3 responses and real ETags.
func TestConformanceOverS3(t *testing.T) {
	srv := objstoretest.StartVersityGW(t)
	t.Run("overlay-versitygw", func(t *testing.T) { runOverS3(t, srv) })
}

func runOverS3(t *testing.T, srv *objstoretest.S3Server) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		real := s3storetest.NewBucket(t, srv)
		o := overlay.New(real, overlay.Options{})
		for _, k := range []string{"!", "a/00", "b/x/a", "k0", "zz"} {
			if _, err := real.Put(t.Context(), k, []byte("hidden")); err != nil {
				t.Fatal(err)
			}
			if err := o.Delete(t.Context(), k, ""); err != nil {
				t.Fatal(err)
			}
		}
		return o
	})
}
