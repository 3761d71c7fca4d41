// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package contexts

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins/openv/openvtest"
	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store"
)

// useVersityGW points the AWS provider's standard configuration at a real
// S3-compatible server through the environment, as an operator would.
func useVersityGW(t *testing.T) *objstoretest.S3Server { return objstoretest.UseVersityGW(t) }

func rawBucket(t *testing.T, srv *objstoretest.S3Server, name string) *s3store.Bucket {
	b, err := s3store.New(context.Background(), s3store.Options{Bucket: name, Region: srv.Region})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConnectAWSAgainstVersityGW(t *testing.T) {
	srv := useVersityGW(t)
	ctx := context.Background()
	env := openvtest.NewEnv(t)

	res, err := Connect(ctx, env, ConnectOptions{Cluster: "prod", Provider: "aws", Bucket: "prod-state"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.BucketCreated || !res.BucketOwned || res.Context.Region != srv.Region || res.Context.SecretsProvider != "aws-parameter-store" {
		t.Fatalf("connect result %+v", res)
	}
	b := rawBucket(t, srv, "prod-state")
	tags, err := b.BucketTags(ctx)
	if err != nil || tags[ClusterTag] != "prod" {
		t.Fatalf("bucket tags %v, %v", tags, err)
	}
	// The probe object is gone again.
	if objs, err := objstore.ListAll(ctx, b, ""); err != nil || len(objs) != 0 {
		t.Fatalf("bucket holds %v after connect (%v)", objs, err)
	}
	// Reconnecting is idempotent.
	if res, err = Connect(ctx, env, ConnectOptions{Cluster: "prod", Provider: "aws", Bucket: "prod-state"}); err != nil || res.BucketCreated || !res.Replaced {
		t.Fatalf("reconnect %+v %v", res, err)
	}

	// Another operator's cluster cannot take the bucket over.
	other := openvtest.NewEnv(t)
	_, err = Connect(ctx, other, ConnectOptions{Cluster: "staging", Provider: "aws", Bucket: "prod-state"})
	if !errors.Is(err, ErrForeignBucket) || !strings.Contains(err.Error(), "tagged podmin:cluster=prod, not staging") {
		t.Fatalf("foreign bucket: %v", err)
	}
	if list, _ := ListContexts(other); len(list) != 0 {
		t.Fatalf("a refused connect saved %v", list)
	}

	// An untagged bucket someone else made is used but not claimed.
	pre := rawBucket(t, srv, "handmade")
	if err := pre.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = Connect(ctx, other, ConnectOptions{Cluster: "staging", Provider: "aws", Bucket: "handmade"})
	if err != nil || res.BucketCreated || res.BucketOwned {
		t.Fatalf("untagged bucket: %+v %v", res, err)
	}
	if tags, err := pre.BucketTags(ctx); err != nil || len(tags) != 0 {
		t.Fatalf("connect claimed an untagged bucket: %v %v", tags, err)
	}
}

func TestConnectLocalOwnership(t *testing.T) {
	ctx := context.Background()
	env := openvtest.NewEnv(t)
	dir := filepath.Join(t.TempDir(), "bucket")
	if _, err := Connect(ctx, env, ConnectOptions{Cluster: "one", Provider: "local", Bucket: dir}); err != nil {
		t.Fatal(err)
	}
	other := openvtest.NewEnv(t)
	if _, err := Connect(ctx, other, ConnectOptions{Cluster: "two", Provider: "local", Bucket: dir}); !errors.Is(err, ErrForeignBucket) {
		t.Fatalf("err = %v", err)
	}
	c, err := env.CurrentContext()
	if err != nil || c.Cluster != "one" || c.Region != "local" || c.SecretsProvider != "local" {
		t.Fatalf("current = %+v, %v", c, err)
	}
}

// TestConnectLocalAdoptsDirectory checks that connect makes an existing
// directory without .podmin a bucket, but does not claim it.
func TestConnectLocalAdoptsDirectory(t *testing.T) {
	ctx := context.Background()
	env := openvtest.NewEnv(t)
	dir := filepath.Join(t.TempDir(), "handmade")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	res, err := Connect(ctx, env, ConnectOptions{Cluster: "one", Provider: "local", Bucket: dir})
	if err != nil || res.BucketCreated || res.BucketOwned {
		t.Fatalf("connect to an existing directory: %+v %v; want used, neither created nor owned", res, err)
	}
	tags, err := localstore.Open(dir).BucketTags(ctx)
	if err != nil || len(tags) != 0 {
		t.Fatalf("connect claimed an existing directory: %v %v", tags, err)
	}
}

// Disconnect forgets the cluster's generated module with its context;
// another cluster's module stays.
func TestDisconnectRemovesTheGeneratedModule(t *testing.T) {
	env := openvtest.NewEnv(t)
	ctx := context.Background()
	if _, err := Connect(ctx, env, ConnectOptions{Cluster: "demo", Provider: "local", Bucket: "demo"}); err != nil {
		t.Fatal(err)
	}
	mine, other := filepath.Join(env.Dirs.Cache, "infrastructure", "demo"), filepath.Join(env.Dirs.Cache, "infrastructure", "prod")
	for _, d := range []string{filepath.Join(mine, ".terraform"), other} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "versions.tf"), []byte("terraform {}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Disconnect(env, DisconnectOptions{Cluster: "demo"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mine); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the generated module of demo remains: %v", err)
	}
	if _, err := os.Stat(filepath.Join(other, "versions.tf")); err != nil {
		t.Fatalf("another cluster's module was removed: %v", err)
	}
	// Disconnecting again is the usual unknown-context error.
	if _, err := Disconnect(env, DisconnectOptions{Cluster: "demo"}); err == nil {
		t.Fatal("a second disconnect succeeded")
	}
}
