// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package oci_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
	"podmin.dev/podmin/internal/oci"
	"podmin.dev/podmin/internal/state"
)

const bigRepo = "registry.podmin.internal/apps/big"

// bigImage is a one-platform index with one layer of random bytes in a
// local store.
type bigImage struct {
	root  string // the store's root
	src   oci.Source
	top   v1.Descriptor
	layer v1.Descriptor
	file  string // the layer's blob file
}

// writeRawBlob streams size bytes from r into the layout dir as a blob.
func writeRawBlob(t testing.TB, dir string, r io.Reader, size int64) v1.Descriptor {
	t.Helper()
	blobs := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(blobs, ".tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || n != size {
		t.Fatalf("write blob: %d bytes, %v", n, err)
	}
	d := v1.Descriptor{Size: size, Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}}
	if err := os.Rename(f.Name(), filepath.Join(blobs, d.Digest.Hex)); err != nil {
		t.Fatal(err)
	}
	return d
}

func writeJSONBlob(t testing.TB, dir string, v any, mt types.MediaType) v1.Descriptor {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	d := writeRawBlob(t, dir, strings.NewReader(string(data)), int64(len(data)))
	d.MediaType = mt
	return d
}

// newBigImage stores an image whose one layer is size random bytes.
func newBigImage(t testing.TB, size int64) bigImage {
	t.Helper()
	root := t.TempDir()
	store := oci.NewStore(root)
	dir, err := store.Dir(bigRepo)
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.NewChaCha8([32]byte{byte(size), byte(size >> 8), byte(size >> 16), byte(time.Now().UnixNano())})
	layer := writeRawBlob(t, dir, rnd, size)
	layer.MediaType = types.OCILayer
	cfg := writeJSONBlob(t, dir, map[string]any{
		"architecture": "amd64", "os": "linux",
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layer.Digest.String()}},
	}, types.OCIConfigJSON)
	mf := writeJSONBlob(t, dir, v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Config: cfg, Layers: []v1.Descriptor{layer}}, types.OCIManifestSchema1)
	mf.Platform = &v1.Platform{OS: "linux", Architecture: "amd64"}
	top := writeJSONBlob(t, dir, v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{mf}}, types.OCIImageIndex)
	if err := store.Tag(bigRepo, top, "v1"); err != nil {
		t.Fatal(err)
	}
	src, err := store.Source(bigRepo)
	if err != nil {
		t.Fatal(err)
	}
	return bigImage{root: root, src: src, top: top, layer: layer, file: filepath.Join(dir, "blobs", "sha256", layer.Digest.Hex)}
}

// target is a bucket a streaming test runs against, with what a child
// process needs to open it again.
type target struct {
	name   string
	bucket objstore.Store
	env    childBucket
}

// childBucket tells a child process which bucket to push to.
type childBucket struct {
	LocalDir string `json:",omitempty"`
	Endpoint string `json:",omitempty"`
	Region   string `json:",omitempty"`
	Bucket   string `json:",omitempty"`
	Access   string `json:",omitempty"`
	Secret   string `json:",omitempty"`
}

func (c childBucket) open(ctx context.Context) (objstore.Store, error) {
	if c.LocalDir != "" {
		return local.Open(c.LocalDir), nil
	}
	return s3store.New(ctx, s3store.Options{
		Bucket: c.Bucket, Region: c.Region, Endpoint: c.Endpoint,
		Credentials: credentials.NewStaticCredentialsProvider(c.Access, c.Secret, ""),
	})
}

// localTarget returns a fresh local bucket.
func localTarget(t testing.TB) target {
	b := newBucket(t)
	return target{name: "local", bucket: b, env: childBucket{LocalDir: b.Dir()}}
}

// s3Target returns a fresh bucket on srv.
func s3Target(t testing.TB, srv *objstoretest.S3Server) target {
	b := s3storetest.NewBucket(t, srv)
	return target{name: "versitygw", bucket: b, env: childBucket{
		Endpoint: srv.Endpoint, Region: srv.Region, Bucket: b.Name(), Access: srv.AccessKey, Secret: srv.SecretKey,
	}}
}

// targets returns a fresh local bucket and a fresh bucket on versitygw.
func targets(t testing.TB) []func(testing.TB) target {
	srv := objstoretest.StartVersityGW(t)
	return []func(testing.TB) target{
		localTarget,
		func(t testing.TB) target { return s3Target(t, srv) },
	}
}

const childEnv = "PODMIN_OCI_PUSH_CHILD"

// childPush is what a push child process is told.
type childPush struct {
	Root   string
	Top    v1.Descriptor
	Bucket childBucket
}

// TestPushChild is the body of a push child process (pushChild); in a
// normal run it does nothing.
func TestPushChild(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		t.Skip("runs only as a child process of the streaming tests")
	}
	var c childPush
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bucket, err := c.Bucket.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	src, err := oci.NewStore(c.Root).Source(bigRepo)
	if err != nil {
		t.Fatal(err)
	}
	dst, _ := state.AppLayout("big")
	start := time.Now()
	res, err := oci.Push(ctx, bucket, src, c.Top, dst, "v1", oci.PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("push-seconds=%f uploaded=%d\n", time.Since(start).Seconds(), res.UploadedBytes)
}

// pushChild pushes img to tg in a child process and returns the push's
// own duration and the child's peak resident set size in bytes.
func pushChild(t testing.TB, img bigImage, tg target) (time.Duration, int64) {
	t.Helper()
	spec, err := json.Marshal(childPush{Root: img.root, Top: img.top, Bucket: tg.env})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPushChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("push child: %v\n%s", err, out)
	}
	var secs float64
	var uploaded int64
	for line := range strings.Lines(string(out)) {
		if _, err := fmt.Sscanf(line, "push-seconds=%f uploaded=%d", &secs, &uploaded); err == nil {
			break
		}
	}
	if uploaded < img.layer.Size {
		t.Fatalf("push child uploaded %d bytes, want at least the %d byte layer:\n%s", uploaded, img.layer.Size, out)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatal("no rusage for the push child")
	}
	return time.Duration(secs * float64(time.Second)), ru.Maxrss << 10 // Maxrss is in KiB on Linux
}

// checkBlobsComplete returns the blob keys under dst and checks that each is a
// complete blob: its content hashes to its name.
func checkBlobsComplete(t testing.TB, bucket objstore.Store, dst state.OCILayout) []string {
	t.Helper()
	ctx := context.Background()
	infos, err := objstore.ListAll(ctx, bucket, dst.Root()+"/blobs/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, info := range infos {
		keys = append(keys, info.Key)
		r, err := objstore.OpenObject(ctx, bucket, info.Key, objstore.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		_, err = io.Copy(h, r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); !strings.HasSuffix(info.Key, "/"+got) {
			t.Errorf("visible blob %s holds content hashing to %s: a partial write became visible", info.Key, got)
		}
	}
	return keys
}

// failingOpener streams a Source's blobs but fails after limit bytes of
// blob digest.
type failingOpener struct {
	oci.Source
	digest v1.Hash
	limit  int64
}

var errDiskGone = errors.New("the local disk went away")

func (f failingOpener) OpenBlob(ctx context.Context, h v1.Hash) (io.ReadCloser, int64, error) {
	rc, size, err := f.Source.(oci.BlobOpener).OpenBlob(ctx, h)
	if err != nil || h != f.digest {
		return rc, size, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(rc, f.limit), errReader{errDiskGone}), rc}, size, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
