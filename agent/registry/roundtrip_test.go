// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package registry_test

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-containerregistry/pkg/name"
	ggcr "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"podmin.dev/podmin/agent/registry"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
	"podmin.dev/podmin/internal/oci"
	"podmin.dev/podmin/internal/oci/build"
	"podmin.dev/podmin/internal/state"
)

// s3Registry serves bucket through the registry with streaming S3 reads.
func s3Registry(t testing.TB, srv *objstoretest.S3Server, bucket *s3store.Bucket) *httptest.Server {
	client := s3.New(s3.Options{
		Region: srv.Region, BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
	})
	ts := httptest.NewServer(registry.New(registry.S3Objects(bucket, client, bucket.Name())))
	t.Cleanup(ts.Close)
	return ts
}

// readLayers reads every layer; go-containerregistry verifies each digest.
func readLayers(img v1.Image) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	for p, content := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRoundTripThroughS3(t *testing.T) {
	ctx := t.Context()
	srv := objstoretest.StartVersityGW(t)
	bucket := s3storetest.NewBucket(t, srv)

	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Containerfile": "ARG BASE=scratch\nFROM ${BASE}\nARG TARGETARCH\n" +
			"COPY --chmod=0755 bin/${TARGETARCH}/hello /hello\nCOPY static/ /srv/static/\nENTRYPOINT [\"/hello\"]\n",
		"bin/amd64/hello":   "amd64 binary",
		"bin/arm64/hello":   "arm64 binary",
		"static/index.html": "<h1>hi</h1>",
	})
	idx, err := build.Build(ctx, build.Options{ContextDir: dir, Platforms: []v1.Platform{
		{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	store := oci.NewStore(t.TempDir())
	top, err := store.Write(ctx, "registry.podmin.internal/apps/hello", idx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	src, _ := store.Source("registry.podmin.internal/apps/hello")
	dst, _ := state.AppLayout("hello")
	if _, err := oci.Push(ctx, bucket, src, top, dst, "v1", oci.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	local, _ := idx.IndexManifest()

	ts := s3Registry(t, srv, bucket)
	host := strings.TrimPrefix(ts.URL, "http://")
	byTag, _ := name.ParseReference(host + "/apps/hello:v1")
	got, err := remote.Index(byTag, remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := got.Digest(); d != top.Digest {
		t.Fatalf("index by tag %s, want %s", d, top.Digest)
	}
	byDigest, _ := name.ParseReference(host + "/apps/hello@" + top.Digest.String())
	if d, err := remote.Index(byDigest, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	} else if h, _ := d.Digest(); h != top.Digest {
		t.Fatalf("index by digest %s", h)
	}
	for _, m := range local.Manifests {
		img, err := remote.Image(byTag, remote.WithContext(ctx), remote.WithPlatform(*m.Platform))
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := img.Digest(); d != m.Digest {
			t.Errorf("%s resolved to %s, want %s", m.Platform, d, m.Digest)
		}
		if err := readLayers(img); err != nil {
			t.Errorf("%s: %v", m.Platform, err)
		}
		cf, _ := img.ConfigFile()
		if cf.Config.User != build.ScratchUser || cf.Architecture != m.Platform.Architecture {
			t.Errorf("%s config user %q arch %q", m.Platform, cf.Config.User, cf.Architecture)
		}
	}

	// A crane-style copy out of the cluster registry into another one.
	other := httptest.NewServer(ggcr.New(ggcr.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(other.Close)
	copyRef, _ := name.ParseReference(strings.TrimPrefix(other.URL, "http://") + "/copy/hello:v1")
	if err := remote.WriteIndex(copyRef, got, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	if d, err := remote.Head(copyRef); err != nil || d.Digest != top.Digest {
		t.Fatalf("copied index %v, %v; want %s", d, err, top.Digest)
	}
}
