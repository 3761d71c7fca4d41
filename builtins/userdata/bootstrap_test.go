// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package userdata

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins/deps"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/objstore/local"
)

// testKernel is the NAT64 AMI's kernel the Jool modules are built for.
const testKernel = "6.12.41+deb13-cloud-amd64"

func TestBootstrapPublishesOnceAndRendersFromTheManifest(t *testing.T) {
	ctx := context.Background()
	cache := &deps.Cache{Dir: t.TempDir()}
	var files []deps.File
	for _, d := range deps.Definitions {
		if d.Optional != deps.Always && d.Optional != deps.NAT64 {
			continue
		}
		a := deps.ARM64
		path := "dependencies/" + d.Key + "/" + d.Key + "-v1.0.0-linux-arm64"
		if d.Key == "jool" {
			a, path = deps.AMD64, "dependencies/jool/jool-v4.1.14-"+testKernel+"-linux-amd64.tar.gz"
		}
		body := []byte("bytes of " + d.Key)
		sum := sha256.Sum256(body)
		f := deps.File{Key: d.Key, Arch: a, Canonical: d.Canonical, Version: "1.0.0", URL: "http://127.0.0.1:1/unused",
			Path: path, Digest: "sha256:" + hex.EncodeToString(sum[:])}
		os.MkdirAll(filepath.Dir(cache.Path(f)), 0o755)
		os.WriteFile(cache.Path(f), body, 0o644)
		files = append(files, f)
	}
	bucket := local.Open(t.TempDir() + "/bucket")
	bucket.CreateBucket(ctx)
	counted := faultstore.New(bucket)
	pause := deps.ImageEntry{Version: "3.10.2", Source: "registry.k8s.io/pause:3.10.2", Path: "mirror/registry.k8s.io/pause",
		Digest: "sha256:" + strings.Repeat("3", 64), Size: 1090874}
	b := &Bootstrap{Store: counted, Cluster: "prod-eu", Bucket: "podmin-prod-eu", Region: "eu-west-1",
		Options: deps.PublishOptions{Archs: []deps.Arch{deps.ARM64}, NAT64Archs: []deps.Arch{deps.AMD64}, Files: files, Cache: cache,
			Images: deps.Images, Mirror: func(context.Context, objstore.Store, deps.Image) (deps.ImageEntry, error) { return pause, nil }}}
	ud, err := b.NodeUserData(ctx, "workers", deps.ARM64)
	if err != nil {
		t.Fatal(err)
	}
	gz, _ := base64.StdEncoding.DecodeString(ud)
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	script, _ := io.ReadAll(zr)
	if !strings.Contains(string(script), "'kubelet|dependencies/kubelet/kubelet-v1.0.0-linux-arm64|sha256:") {
		t.Fatalf("user data lacks the published kubelet row:\n%s", script)
	}
	writes := counted.Counts().Writes()
	if _, err := b.NodeUserData(ctx, "web", deps.ARM64); err != nil {
		t.Fatal(err)
	}
	key, sum, err := b.JoolArchive(ctx, deps.AMD64)
	if err != nil || key != "dependencies/jool/jool-v4.1.14-"+testKernel+"-linux-amd64.tar.gz" || len(sum) != 64 {
		t.Fatalf("jool %s %s %v", key, sum, err)
	}
	if counted.Counts().Writes() != writes {
		t.Fatal("publication ran more than once")
	}
	if _, _, err := b.JoolArchive(ctx, deps.ARM64); err == nil {
		t.Fatal("a Jool archive for an architecture without NAT64")
	}
	if _, err := b.NodeUserData(ctx, "x", deps.AMD64); err == nil || !strings.Contains(err.Error(), "lacks") {
		t.Fatalf("err = %v: amd64 was not published", err)
	}
}

func TestDebianImageManifestURL(t *testing.T) {
	u, err := DebianImageManifestURL("debian-13-arm64-20250814-2204")
	if err != nil || u != "https://cloud.debian.org/images/cloud/trixie/20250814-2204/debian-13-ec2-arm64-20250814-2204.json" {
		t.Fatalf("%s %v", u, err)
	}
	if _, err := DebianImageManifestURL("ubuntu-24.04-arm64"); err == nil {
		t.Fatal("accepted a foreign AMI")
	}
}
