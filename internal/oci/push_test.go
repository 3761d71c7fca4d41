// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package oci_test

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/oci"
	"podmin.dev/podmin/internal/state"
)

const localRepo = "registry.podmin.internal/apps/hello"

// stored writes a random index into a fresh local store.
func stored(t *testing.T, store *oci.Store, tag string) (oci.Source, v1.Descriptor) {
	t.Helper()
	d, err := store.Write(t.Context(), localRepo, testIndex(t), tag)
	if err != nil {
		t.Fatal(err)
	}
	src, err := store.Source(localRepo)
	if err != nil {
		t.Fatal(err)
	}
	return src, d
}

func readIndex(t *testing.T, s objstore.Store, l state.OCILayout) *v1.IndexManifest {
	t.Helper()
	obj, err := s.Get(t.Context(), l.IndexFile(), objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := oci.ParseIndex(obj.Data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPushPublishesEverythingAndRepushWritesNothing(t *testing.T) {
	ctx := t.Context()
	bucket := faultstore.New(newBucket(t))
	src, top := stored(t, oci.NewStore(t.TempDir()), "v1")
	dst, _ := state.AppLayout("hello")

	res, err := oci.Push(ctx, bucket, src, top, dst, "v1", oci.PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// 1 index + 2 × (manifest + config + 2 layers)
	if res.Blobs != 9 || res.Uploaded != 9 || !res.IndexUpdated {
		t.Fatalf("first push %+v, want 9 blobs uploaded and the index updated", res)
	}
	m := readIndex(t, bucket, dst)
	if d, ok := oci.FindTag(m, "v1"); !ok || d.Digest != top.Digest {
		t.Fatalf("tag v1 = %v, %v; want %s", d.Digest, ok, top.Digest)
	}
	if len(m.Manifests) != 3 {
		t.Errorf("index.json lists %d descriptors, want the tag and its 2 platform manifests", len(m.Manifests))
	}
	for _, d := range m.Manifests[1:] {
		if d.Platform == nil || d.Annotations[oci.RefNameAnnotation] != "" {
			t.Errorf("nested descriptor %+v should keep its platform and carry no tag", d)
		}
	}
	if obj, err := bucket.Get(ctx, dst.LayoutFile(), objstore.GetOptions{}); err != nil || string(obj.Data) != oci.LayoutFileContent {
		t.Errorf("oci-layout = %q, %v", obj.Data, err)
	}

	bucket.ResetCounts()
	res, err = oci.Push(ctx, bucket, src, top, dst, "v1", oci.PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := bucket.Counts()
	if res.Uploaded != 0 || res.IndexUpdated || c.Writes() != 0 || c.Get != 1 || c.Head != 10 {
		t.Errorf("re-push result %+v with requests %+v; want no writes, 10 Heads and 1 Get", res, c)
	}
}

func TestInterruptedPushLeavesTagAndRetryCompletes(t *testing.T) {
	ctx := t.Context()
	bucket := faultstore.New(newBucket(t))
	store := oci.NewStore(t.TempDir())
	dst, _ := state.AppLayout("hello")
	src, old := stored(t, store, "v1")
	if _, err := oci.Push(ctx, bucket, src, old, dst, "v1", oci.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	before, _ := bucket.Get(ctx, dst.IndexFile(), objstore.GetOptions{})

	src, next := stored(t, store, "v1")
	bucket.SetRules(faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpPutIfAbsent}, Prefix: dst.Root() + "/blobs/", Skip: 4})
	_, err := oci.Push(ctx, bucket, src, next, dst, "v1", oci.PushOptions{Concurrency: 2})
	if !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("interrupted push error = %v, want the injected fault", err)
	}
	after, _ := bucket.Get(ctx, dst.IndexFile(), objstore.GetOptions{})
	if !bytes.Equal(before.Data, after.Data) {
		t.Fatal("an interrupted push changed index.json")
	}
	bucket.SetRules()
	res, err := oci.Push(ctx, bucket, src, next, dst, "v1", oci.PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Uploaded != res.Blobs-4 {
		t.Errorf("retry uploaded %d of %d blobs, want all but the 4 uploaded before the fault", res.Uploaded, res.Blobs)
	}
	if d, _ := oci.FindTag(readIndex(t, bucket, dst), "v1"); d.Digest != next.Digest {
		t.Errorf("v1 = %s after the retry, want %s", d.Digest, next.Digest)
	}
}

func TestAmbiguousIndexWriteThenRetry(t *testing.T) {
	ctx := t.Context()
	bucket := faultstore.New(newBucket(t), faultstore.WithRules(faultstore.Rule{
		Action: faultstore.Ambiguous, Ops: []faultstore.Op{faultstore.OpPutIfAbsent}, Prefix: "apps/hello/index.json", Limit: 1,
	}))
	src, top := stored(t, oci.NewStore(t.TempDir()), "v1")
	dst, _ := state.AppLayout("hello")
	if _, err := oci.Push(ctx, bucket, src, top, dst, "v1", oci.PushOptions{}); !errors.Is(err, faultstore.ErrAmbiguous) {
		t.Fatalf("push error = %v, want the ambiguous write reported", err)
	}
	bucket.ResetCounts()
	res, err := oci.Push(ctx, bucket, src, top, dst, "v1", oci.PushOptions{})
	if err != nil || res.IndexUpdated || bucket.Counts().Writes() != 0 {
		t.Fatalf("retry %+v, %v, requests %+v: want it to find the landed write and write nothing", res, err, bucket.Counts())
	}
}

func TestConcurrentPushesKeepEveryTag(t *testing.T) {
	ctx := t.Context()
	bucket := faultstore.New(newBucket(t))
	dst, _ := state.AppLayout("hello")
	store := oci.NewStore(t.TempDir())
	const n = 6
	srcs := make([]oci.Source, n)
	tops := make([]v1.Descriptor, n)
	for i := range n {
		srcs[i], tops[i] = stored(t, store, fmt.Sprintf("t%d", i))
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = oci.Push(ctx, bucket, srcs[i], tops[i], dst, fmt.Sprintf("t%d", i), oci.PushOptions{MaxAttempts: 50})
		})
	}
	wg.Wait()
	m := readIndex(t, bucket, dst)
	for i := range n {
		if errs[i] != nil {
			t.Errorf("push %d: %v", i, errs[i])
		}
		if d, ok := oci.FindTag(m, fmt.Sprintf("t%d", i)); !ok || d.Digest != tops[i].Digest {
			t.Errorf("tag t%d = %v (%v), want %s", i, d.Digest, ok, tops[i].Digest)
		}
	}
	if len(m.Manifests) != 3*n {
		t.Errorf("index.json has %d descriptors, want %d", len(m.Manifests), 3*n)
	}
	if c := bucket.Counts(); c.PutIfMatch+c.PutIfAbsent <= 9*n {
		t.Logf("requests %+v", c)
	}
}

func TestMergeTagReplacesOnlyItsTag(t *testing.T) {
	h := func(c byte) v1.Hash { return v1.Hash{Algorithm: "sha256", Hex: string(bytes.Repeat([]byte{c}, 64))} }
	tagged := func(c byte, tag string) v1.Descriptor {
		return v1.Descriptor{Digest: h(c), Annotations: map[string]string{oci.RefNameAnnotation: tag}}
	}
	m := oci.EmptyIndex()
	m.Manifests = []v1.Descriptor{tagged('a', "v1"), tagged('b', "v2"), {Digest: h('c')}}
	out := oci.MergeTag(m, "v1", v1.Descriptor{Digest: h('d')}, []v1.Descriptor{{Digest: h('c')}, {Digest: h('e'), Annotations: map[string]string{oci.RefNameAnnotation: "x"}}})
	var got []string
	for _, d := range out.Manifests {
		got = append(got, d.Digest.Hex[:1]+":"+d.Annotations[oci.RefNameAnnotation])
	}
	if want := "[d:v1 b:v2 c: e:]"; fmt.Sprint(got) != want {
		t.Errorf("merged = %v, want %s", got, want)
	}
	if len(m.Manifests) != 3 || m.Manifests[0].Digest != h('a') {
		t.Error("MergeTag changed its input")
	}
}

// A stored blob the node registry would refuse is replaced by the next
// push: one of another size on any store, one with other content where the
// store knows the content digest (local). A same-size corrupt blob on a
// store without content digests is not detected (the documented limit).
func TestPushReplacesStoredBlobsTheRegistryRefuses(t *testing.T) {
	ctx := t.Context()
	src, top := stored(t, oci.NewStore(t.TempDir()), "v1")
	dst, _ := state.AppLayout("hello")
	for _, tc := range []struct {
		name     string
		digests  bool // the store knows content digests
		truncate bool // corrupt by truncating rather than flipping a byte
		replaced bool
	}{
		{"local, other content", true, false, true},
		{"local, truncated", true, true, true},
		{"no content digests, truncated", false, true, true},
		{"no content digests, other content of the same size", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := newBucket(t)
			var bucket objstore.Store = local
			if !tc.digests {
				bucket = objstoretest.WithoutContentDigests(local)
			}
			if _, err := oci.Push(ctx, bucket, src, top, dst, "v1", oci.PushOptions{}); err != nil {
				t.Fatal(err)
			}
			blobs, err := objstore.ListAll(ctx, local, dst.Root()+"/blobs/")
			if err != nil || len(blobs) == 0 {
				t.Fatalf("blobs %v, %v", blobs, err)
			}
			victim := slices.MaxFunc(blobs, func(a, b objstore.Info) int { return cmp.Compare(a.Size, b.Size) })
			obj, err := local.Get(ctx, victim.Key, objstore.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			good := obj.Data
			bad := bytes.Clone(good)
			if tc.truncate {
				bad = bad[:len(bad)-1]
			} else {
				bad[len(bad)/2] ^= 0xff
			}
			if _, err := local.Put(ctx, victim.Key, bad); err != nil {
				t.Fatal(err)
			}
			res, err := oci.Push(ctx, bucket, src, top, dst, "v1", oci.PushOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := local.Get(ctx, victim.Key, objstore.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.replaced && (res.Uploaded != 1 || !bytes.Equal(got.Data, good)) {
				t.Fatalf("re-push uploaded %d blobs; the corrupt blob replaced: %v", res.Uploaded, bytes.Equal(got.Data, good))
			}
			if !tc.replaced && (res.Uploaded != 0 || !bytes.Equal(got.Data, bad)) {
				t.Fatalf("re-push uploaded %d blobs over a same-size blob a store without digests cannot tell apart", res.Uploaded)
			}
		})
	}
}
