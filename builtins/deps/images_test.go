// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"slices"
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
	"podmin.dev/podmin/internal/objstore/faultstore"
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
	opts.Images, opts.Mirror, opts.Check = []Image{pause}, m.Mirror, m.Check
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

	// Legacy metadata: index.json tags the image but lists no nested
	// manifests. Setup repairs it from the bucket's own image index and
	// uploads no blob.
	parsed, err := oci.ParseIndex(index.Data)
	if err != nil {
		t.Fatal(err)
	}
	tagged, _ := oci.FindTag(parsed, "3.10.2")
	parsed.Manifests = []v1.Descriptor{tagged}
	legacy, _ := oci.EncodeIndex(parsed)
	if _, err := bucket.Put(ctx, e.Path+"/index.json", legacy); err != nil {
		t.Fatal(err)
	}
	counted := faultstore.New(bucket)
	res, err = Publish(ctx, counted, opts)
	if err != nil || res.Written || len(res.Images) != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if c := counted.Counts(); c.Put+c.PutIfAbsent != 0 || c.PutIfMatch != 1 {
		t.Fatalf("repair requests %+v: want one index.json compare-and-swap and no blob upload", c)
	}
	repaired, _ := bucket.Get(ctx, e.Path+"/index.json", objstore.GetOptions{})
	if !bytes.Equal(repaired.Data, index.Data) {
		t.Fatalf("repaired index.json differs from a fresh push:\n%s\n%s", repaired.Data, index.Data)
	}
	// A missing mirror is mirrored again (from the local image store).
	for _, k := range []string{e.Path + "/index.json"} {
		bucket.Delete(ctx, k, "")
	}
	res, err = Publish(ctx, bucket, opts)
	if err != nil || !slices.Equal(res.Images, []string{"pause"}) {
		t.Fatalf("%+v %v", res, err)
	}
}
