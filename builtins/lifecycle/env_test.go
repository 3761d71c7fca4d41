// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle_test

import (
	"context"
	"path/filepath"
	"testing"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/cloud/aws"
	"podmin.dev/podmin/internal/cloud/local"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store"
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
func useVersityGW(t *testing.T) *objstoretest.S3Server {
	srv := objstoretest.StartVersityGW(t)
	t.Setenv("AWS_ENDPOINT_URL_S3", srv.Endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_REGION", srv.Region)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return srv
}

func rawBucket(t *testing.T, srv *objstoretest.S3Server, name string) *s3store.Bucket {
	b, err := s3store.New(context.Background(), s3store.Options{Bucket: name, Region: srv.Region})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
