// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle_test

import (
	"path/filepath"
	"testing"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/cloud/aws"
	"podmin.dev/podmin/internal/cloud/local"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
	"podmin.dev/podmin/internal/paths"
)

// testEnv is an Env over temporary directories with the aws and local
// providers.
func testEnv(t *testing.T) *builtins.Env {
	root := t.TempDir()
	dirs := paths.Dirs{
		Config: filepath.Join(root, "config"), Cache: filepath.Join(root, "cache"),
		Data: filepath.Join(root, "data"), Runtime: filepath.Join(root, "run"),
	}
	return &builtins.Env{Dirs: dirs, Providers: map[string]cloud.Provider{
		"aws":   aws.Provider{},
		"local": local.New(dirs.Data),
	}}
}

// useVersityGW points the AWS provider's standard configuration at a real
// S3-compatible server through the environment, as an operator would.
func useVersityGW(t *testing.T) *objstoretest.S3Server { return objstoretest.UseVersityGW(t) }

// rawBucket opens a bucket on srv directly, past Podmin's provider.
func rawBucket(t *testing.T, srv *objstoretest.S3Server, name string) *s3store.Bucket {
	return s3storetest.Open(t, srv, name)
}
