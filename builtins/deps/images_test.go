// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/oci"
)

func TestOCIMirrorPublishesPauseImage(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range []string{"amd64", "arm64"} {
		img, err := random.Image(256, 1)
		if err != nil {
			t.Fatal(err)
		}
		img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	ref, _ := name.ParseReference(host + "/pause:3.10.2")
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	pause := Image{Key: "pause", Registry: host, Repository: "pause", Version: "3.10.2"}
	bucket := local.Open(t.TempDir() + "/bucket")
	if err := bucket.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	m := &OCIMirror{Local: oci.NewStore(t.TempDir())}
	u := newFakeUpstream(t)
	opts := testPublishOptions(t, u, testFiles(t, u))
	opts.Images, opts.Mirror = []Image{pause}, m.Mirror
	res, err := Publish(ctx, bucket, opts)
	if err != nil {
		t.Fatal(err)
	}
	e := res.Manifest.Images["pause"]
	want, _ := idx.Digest()
	if e.Digest != want.String() || e.Path != "mirror/"+host+"/pause" || e.Source != host+"/pause:3.10.2" || e.Version != "3.10.2" {
		t.Fatalf("entry %+v", e)
	}
	// Size: every reachable blob once (2 layers, 2 configs, 2 manifests,
	// the index), as listed beneath blobs/.
	blobs, err := objstore.ListAll(ctx, bucket, e.Path+"/blobs/")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, b := range blobs {
		total += b.Size
	}
	if len(blobs) != 7 || e.Size != total {
		t.Fatalf("%d blobs of %d bytes, entry says %d", len(blobs), total, e.Size)
	}
	index, err := bucket.Get(ctx, e.Path+"/index.json", objstore.GetOptions{})
	if err != nil || strings.Count(string(index.Data), `"digest"`) < 3 {
		t.Fatalf("index.json must expose the nested manifests: %s %v", index.Data, err)
	}
	// A second setup keeps the recorded image without contacting the
	// registry.
	srv.Close()
	res, err = Publish(ctx, bucket, opts)
	if err != nil || res.Written || len(res.Images) != 0 {
		t.Fatalf("%+v %v", res, err)
	}
}
