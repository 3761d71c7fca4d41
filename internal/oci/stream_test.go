// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package oci_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/oci"
	ociremote "podmin.dev/podmin/internal/oci/remote"
	"podmin.dev/podmin/internal/state"
)

// TestPushStreamsWithBoundedMemory pushes a 24 MiB and a 96 MiB layer
// (both above an S3 part), each in a child process, to each store: the
// child's peak RSS must not grow with the layer (by less than half of the
// 72 MiB more data) and, without the race detector's shadow memory, stay
// below 64 MiB.
func TestPushStreamsWithBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 120 MiB to each store")
	}
	const small, big = 24 << 20, 96 << 20
	imgs := []bigImage{newBigImage(t, small), newBigImage(t, big)}
	for _, newTarget := range targets(t) {
		name := newTarget(t).name
		t.Run(name, func(t *testing.T) {
			var rss [2]int64
			for i, img := range imgs {
				tg := newTarget(t)
				took, r := pushChild(t, img, tg)
				rss[i] = r
				size := img.layer.Size
				t.Logf("%s: pushed %d MiB in %v (%.0f MB/s), peak RSS %.1f MiB", name, size>>20, took, float64(size)/took.Seconds()/1e6, float64(r)/(1<<20))
				dst, _ := state.AppLayout("big")
				key, _ := dst.BlobPath(img.layer.Digest.String())
				if info, err := tg.bucket.Head(t.Context(), key); err != nil || info.Size != size {
					t.Errorf("layer after the push: %+v, %v", info, err)
				}
			}
			if grew := rss[1] - rss[0]; grew > (big-small)/2 {
				t.Errorf("peak RSS grew by %.1f MiB from a %d MiB to a %d MiB layer: the push holds blobs in memory", float64(grew)/(1<<20), small>>20, big>>20)
			}
			if !raceEnabled && rss[1] >= 64<<20 {
				t.Errorf("push peak RSS %.1f MiB, want below 64 MiB", float64(rss[1])/(1<<20))
			}
		})
	}
}

// TestInterruptedPushLeavesNothingVisible breaks a push in the middle of
// its largest blob, by a failing read and by cancellation, and checks that
// no partial blob and no index.json became visible, and that a retry
// completes.
func TestInterruptedPushLeavesNothingVisible(t *testing.T) {
	const size = 8 << 20 // multipart on S3, spooled locally
	img := newBigImage(t, size)
	dst, _ := state.AppLayout("big")
	layerKey, _ := dst.BlobPath(img.layer.Digest.String())
	for _, newTarget := range targets(t) {
		for _, how := range []string{"read-error", "cancel"} {
			tg := newTarget(t)
			t.Run(tg.name+"/"+how, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				var src oci.Source = failingOpener{Source: img.src, digest: img.layer.Digest, limit: 5 << 20}
				want := errDiskGone
				if how == "cancel" {
					src = cancellingOpener{Source: img.src, digest: img.layer.Digest, limit: 5 << 20, cancel: cancel}
					want = context.Canceled
				}
				_, err := oci.Push(ctx, tg.bucket, src, img.top, dst, "v1", oci.PushOptions{Concurrency: 1})
				if !errors.Is(err, want) {
					t.Fatalf("interrupted push error = %v, want %v", err, want)
				}
				for _, k := range checkBlobsComplete(t, tg.bucket, dst) {
					if k == layerKey {
						t.Errorf("the interrupted layer %s is visible", k)
					}
				}
				if _, err := tg.bucket.Head(t.Context(), dst.IndexFile()); !errors.Is(err, objstore.ErrNotFound) {
					t.Errorf("index.json after an interrupted push: %v, want none", err)
				}
				res, err := oci.Push(t.Context(), tg.bucket, img.src, img.top, dst, "v1", oci.PushOptions{})
				if err != nil {
					t.Fatalf("retry: %v", err)
				}
				if res.UploadedBytes < size {
					t.Errorf("retry uploaded %d bytes, want the %d byte layer", res.UploadedBytes, size)
				}
				checkBlobsComplete(t, tg.bucket, dst)
				if d, ok := oci.FindTag(readIndex(t, tg.bucket, dst), "v1"); !ok || d.Digest != img.top.Digest {
					t.Errorf("v1 after the retry = %v, %v", d.Digest, ok)
				}
			})
		}
	}
}

// cancellingOpener cancels the push after limit bytes of one blob.
type cancellingOpener struct {
	oci.Source
	digest v1.Hash
	limit  int64
	cancel context.CancelFunc
}

func (c cancellingOpener) OpenBlob(ctx context.Context, h v1.Hash) (io.ReadCloser, int64, error) {
	rc, size, err := c.Source.(oci.BlobOpener).OpenBlob(ctx, h)
	if err != nil || h != c.digest {
		return rc, size, err
	}
	return &cancelAfter{ReadCloser: rc, left: c.limit, cancel: c.cancel, ctx: ctx}, size, nil
}

type cancelAfter struct {
	io.ReadCloser
	left   int64
	cancel context.CancelFunc
	ctx    context.Context
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	if c.left <= 0 {
		c.cancel()
		<-c.ctx.Done()
		return 0, c.ctx.Err()
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.ReadCloser.Read(p)
	c.left -= int64(n)
	return n, err
}

// TestPushRefusesTamperedLocalBlob changes one byte of a stored layer:
// the push fails with ErrDigestMismatch and stores no layer and no tag.
func TestPushRefusesTamperedLocalBlob(t *testing.T) {
	img := newBigImage(t, 3<<20)
	f, err := os.OpenFile(img.file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	_, _ = f.ReadAt(b[:], 1<<20)
	b[0] ^= 0xff
	_, _ = f.WriteAt(b[:], 1<<20)
	f.Close()
	dst, _ := state.AppLayout("big")
	for _, newTarget := range targets(t) {
		tg := newTarget(t)
		t.Run(tg.name, func(t *testing.T) {
			_, err := oci.Push(t.Context(), tg.bucket, img.src, img.top, dst, "v1", oci.PushOptions{})
			if !errors.Is(err, oci.ErrDigestMismatch) {
				t.Fatalf("push of a tampered blob: %v, want ErrDigestMismatch", err)
			}
			key, _ := dst.BlobPath(img.layer.Digest.String())
			if _, err := tg.bucket.Head(t.Context(), key); !errors.Is(err, objstore.ErrNotFound) {
				t.Errorf("tampered layer stored: %v", err)
			}
			checkBlobsComplete(t, tg.bucket, dst)
			if _, err := tg.bucket.Head(t.Context(), dst.IndexFile()); !errors.Is(err, objstore.ErrNotFound) {
				t.Errorf("index.json written for a tampered image: %v", err)
			}
		})
	}
}

func TestVerifyingReader(t *testing.T) {
	data := []byte(strings.Repeat("podmin", 1000))
	d := v1.Descriptor{Size: int64(len(data)), Digest: mustDigest(t, data)}
	if got, err := io.ReadAll(oci.VerifyingReader(strings.NewReader(string(data)), d)); err != nil || string(got) != string(data) {
		t.Fatalf("intact blob: %d bytes, %v", len(got), err)
	}
	for name, body := range map[string]string{
		"changed": "X" + string(data[1:]),
		"short":   string(data[:len(data)-1]),
		"long":    string(data) + "!",
	} {
		got, err := io.ReadAll(oci.VerifyingReader(strings.NewReader(body), d))
		if !errors.Is(err, oci.ErrDigestMismatch) {
			t.Errorf("%s blob: error %v, want ErrDigestMismatch", name, err)
		}
		if len(got) >= len(data) {
			t.Errorf("%s blob: %d bytes delivered, want the last read held back", name, len(got))
		}
	}
}

func mustDigest(t *testing.T, data []byte) v1.Hash {
	h, _, err := v1.SHA256(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestOversizedIndexRefusedEarly checks that an index.json above the limit
// is refused before it is read whole: in the bucket (by its size, and by
// the limit while reading when the store misreports the size) and in the
// local image store (a 1 GiB sparse file).
func TestOversizedIndexRefusedEarly(t *testing.T) {
	ctx := t.Context()
	img := newBigImage(t, 1<<10)
	dst, _ := state.AppLayout("big")
	const size = 3 * oci.MaxIndexSize
	for _, lie := range []bool{false, true} {
		base := newBucket(t)
		if _, err := objstore.WriteObject(ctx, base, dst.IndexFile(), io.LimitReader(zeros{}, size), size, objstore.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		bucket := &objstoretest.CountingStore{Store: base, LieSize: lie}
		_, err := oci.Push(ctx, bucket, img.src, img.top, dst, "v1", oci.PushOptions{})
		if err == nil || !strings.Contains(err.Error(), "byte limit") {
			t.Fatalf("push over an oversized index.json (size misreported: %v): %v", lie, err)
		}
		if n := bucket.Read.Load(); n > oci.MaxIndexSize+1 {
			t.Errorf("read %d bytes of a %d byte index.json (size misreported: %v), want at most the limit", n, size, lie)
		}
	}

	store := oci.NewStore(img.root)
	dir, _ := store.Dir(bigRepo)
	if err := os.Truncate(filepath.Join(dir, "index.json"), 1<<30); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Index(bigRepo); err == nil || !strings.Contains(err.Error(), "byte limit") {
		t.Errorf("1 GiB local index.json: %v, want it refused by its size", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestPullRefusesTamperedBlob serves a layer whose bytes were changed: the
// pull fails, and neither the layer nor the tag reach the local store.
func TestPullRefusesTamperedBlob(t *testing.T) {
	ctx := t.Context()
	reg := registry.New()
	var tamper atomic.Value // the layer digest to tamper with
	tamper.Store("")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d := tamper.Load().(string); d != "" && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+d) {
			rec := httptest.NewRecorder()
			reg.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			body[len(body)/2] ^= 0xff
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(body)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	img, err := random.Image(64<<10, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := name.ParseReference(host + "/example/tampered:v1")
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	tamper.Store(ld.String())

	lr, _ := oci.RemoteRef(host + "/example/tampered:v1")
	root := t.TempDir()
	store := oci.NewStore(root)
	if _, err := ociremote.Pull(ctx, store, lr.Remote, lr.Repo, lr.Tag); err == nil {
		t.Fatal("a tampered layer was pulled")
	}
	if _, err := store.Lookup(lr.Repo, lr.Tag); !errors.Is(err, oci.ErrNotFound) {
		t.Errorf("tag after a refused pull: %v", err)
	}
	dir, _ := store.Dir(lr.Repo)
	if _, err := os.Stat(filepath.Join(dir, "blobs", "sha256", ld.Hex)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("tampered layer stored: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}
