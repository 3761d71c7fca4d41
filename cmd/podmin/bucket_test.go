// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store"
)

// checkMissingBucket runs list, deploy and delete against a context whose
// bucket is gone: each fails naming the bucket and what to check, and none
// reads the absence as an empty cluster.
func checkMissingBucket(t *testing.T, c *cli, bucket string) {
	t.Helper()
	for _, args := range [][]string{
		{"list"},
		{"list", "-o", "json"},
		{"deploy", "web", "-g", "workers", "--image", "hello:v2"},
		{"delete", "web", "-g", "workers", "--yes"},
		{"delete", "web", "-g", "workers", "--ignore-not-found", "--yes"},
		{"preview", "-g", "workers"},
	} {
		out, errs, code := c.run(args...)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1\n%s%s", args, code, out, errs)
		}
		for _, want := range []string{"bucket " + bucket + " of cluster demo does not exist", "check the bucket name and region", "nothing was changed"} {
			if !strings.Contains(errs, want) {
				t.Errorf("%s: error lacks %q:\n%s", args, want, errs)
			}
		}
		for _, never := range []string{"no deployments", "does not exist: nothing was changed; run \"podmin list\"", "deleted from the desired state", "workers/web created", "[]"} {
			if strings.Contains(out+errs, never) {
				t.Errorf("%s: output reads the missing bucket as an empty cluster (%q):\n%s%s", args, never, out, errs)
			}
		}
	}
}

func TestMissingBucketLocal(t *testing.T) {
	c := newCLI(t)
	bucket := c.connectLocal()
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	// A directory without the store's metadata is no bucket either.
	if err := os.RemoveAll(filepath.Join(bucket, ".podmin")); err != nil {
		t.Fatal(err)
	}
	checkMissingBucket(t, c, bucket)
	if err := os.RemoveAll(bucket); err != nil {
		t.Fatal(err)
	}
	checkMissingBucket(t, c, bucket)
	// Once the bucket is back, an empty one is an empty cluster.
	c.ok("connect", "demo", "--provider", "local", "--bucket", bucket)
	if out := c.ok("list"); !strings.Contains(out, "no deployments committed") {
		t.Fatalf("list of the recreated bucket:\n%s", out)
	}
}

func TestMissingBucketVersityGW(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a versitygw server: run without -short")
	}
	srv := objstoretest.StartVersityGW(t)
	awsTestEnv(t, srv.Endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_REGION", srv.Region)
	ctx := context.Background()
	c := newCLI(t)
	const bucket = "gone-state"
	c.ok("connect", "demo", "--provider", "aws", "--bucket", bucket)
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")

	b, err := s3store.New(ctx, s3store.Options{Bucket: bucket, Region: srv.Region})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := objstore.ListAll(ctx, b, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := b.Delete(ctx, o.Key, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Client().DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	checkMissingBucket(t, c, bucket)
	c.ok("connect", "demo", "--provider", "aws", "--bucket", bucket)
	if out := c.ok("list"); !strings.Contains(out, "no deployments committed") {
		t.Fatalf("list of the recreated bucket:\n%s", out)
	}
}
