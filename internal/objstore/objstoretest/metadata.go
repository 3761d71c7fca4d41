// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package objstoretest

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/objstore"
)

// metadataTests are the user metadata cases of the suite.
var metadataTests = []struct {
	name string
	fn   func(t *testing.T, s objstore.Store)
}{
	{"MetadataRoundTrip", testMetadataRoundTrip},
	{"MetadataReplacedWithObject", testMetadataReplaced},
	{"MetadataConditional", testMetadataConditional},
	{"MetadataInvalid", testMetadataInvalid},
}

// keepsMetadata reports whether s keeps user metadata, which a store does
// through its Streamer. For a store without one it checks the fallback's
// refusal (ErrMetadataUnsupported, nothing written) instead.
func keepsMetadata(t *testing.T, s objstore.Store) bool {
	t.Helper()
	if _, ok := s.(objstore.Streamer); ok {
		return true
	}
	_, err := objstore.PutWithOptions(t.Context(), s, "no-metadata", []byte("x"), objstore.PutOptions{Metadata: map[string]string{"k": "v"}})
	if !errors.Is(err, objstore.ErrMetadataUnsupported) {
		t.Fatalf("PutWithOptions with metadata on a store without a Streamer: error = %v, want ErrMetadataUnsupported", err)
	}
	if _, err := s.Head(t.Context(), "no-metadata"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("a refused PutWithOptions wrote the object: Head error = %v", err)
	}
	t.Logf("%T has no Streamer: metadata is refused, so only that is checked", s)
	return false
}

// metadataIf returns md when s keeps metadata, else nil.
func metadataIf(keeps bool, md map[string]string) map[string]string {
	if keeps {
		return md
	}
	return nil
}

// checkMetadata asserts the metadata Get and Head report for key.
func checkMetadata(t *testing.T, s objstore.Store, key string, want map[string]string) {
	t.Helper()
	obj, err := s.Get(t.Context(), key, objstore.GetOptions{})
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if !maps.Equal(obj.Metadata, want) {
		t.Errorf("Get(%q) metadata = %v, want %v", key, obj.Metadata, want)
	}
	info, err := s.Head(t.Context(), key)
	if err != nil {
		t.Fatalf("Head(%q): %v", key, err)
	}
	if !maps.Equal(info.Metadata, want) {
		t.Errorf("Head(%q) metadata = %v, want %v", key, info.Metadata, want)
	}
	r, err := objstore.OpenObject(t.Context(), s, key, objstore.GetOptions{})
	if err != nil {
		t.Fatalf("OpenObject(%q): %v", key, err)
	}
	r.Close()
	if !maps.Equal(r.Info.Metadata, want) {
		t.Errorf("OpenObject(%q) metadata = %v, want %v", key, r.Info.Metadata, want)
	}
}

func testMetadataRoundTrip(t *testing.T, s objstore.Store) {
	if !keepsMetadata(t, s) {
		t.Skip("the store keeps no metadata")
	}
	ctx := t.Context()
	md := map[string]string{"write-id": "0f3c9a7e", "a": "value with spaces, = and / signs", "empty": ""}
	etag, err := objstore.PutWithOptions(ctx, s, "md/object", []byte("body"), objstore.PutOptions{Metadata: md})
	if err != nil {
		t.Fatalf("PutWithOptions: %v", err)
	}
	checkObject(t, s, "md/object", []byte("body"), etag)
	want := maps.Clone(md)
	if s3DropsEmptyValues(t, s, "md/object") {
		delete(want, "empty")
	}
	checkMetadata(t, s, "md/object", want)
	// Listings carry no metadata (S3's ListObjectsV2 has none).
	page, err := s.List(ctx, "md/", objstore.ListOptions{})
	if err != nil || len(page.Objects) != 1 || page.Objects[0].ETag != etag {
		t.Fatalf("List = %+v, %v; want the one object with ETag %s", page, err, etag)
	}
	// An object written without metadata has none.
	mustPut(t, s, "md/plain", []byte("x"))
	checkMetadata(t, s, "md/plain", nil)
}

// s3DropsEmptyValues reports whether the store dropped the empty value of
// key "empty" (some S3 services omit empty x-amz-meta headers).
func s3DropsEmptyValues(t *testing.T, s objstore.Store, key string) bool {
	info, err := s.Head(t.Context(), key)
	if err != nil {
		t.Fatalf("Head(%q): %v", key, err)
	}
	_, ok := info.Metadata["empty"]
	if !ok {
		t.Logf("the store drops metadata with an empty value")
	}
	return !ok
}

func testMetadataReplaced(t *testing.T, s objstore.Store) {
	if !keepsMetadata(t, s) {
		t.Skip("the store keeps no metadata")
	}
	ctx := t.Context()
	if _, err := objstore.PutWithOptions(ctx, s, "k", []byte("v1"), objstore.PutOptions{Metadata: map[string]string{"write-id": "one", "old": "x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := objstore.PutWithOptions(ctx, s, "k", []byte("v2"), objstore.PutOptions{Metadata: map[string]string{"write-id": "two"}}); err != nil {
		t.Fatal(err)
	}
	checkMetadata(t, s, "k", map[string]string{"write-id": "two"})
	// A plain Put replaces the metadata with none.
	mustPut(t, s, "k", []byte("v3"))
	checkMetadata(t, s, "k", nil)
	// Deleting and recreating leaves nothing of the old metadata.
	if _, err := objstore.PutWithOptions(ctx, s, "k", []byte("v4"), objstore.PutOptions{Metadata: map[string]string{"write-id": "four"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "k", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutIfAbsent(ctx, "k", []byte("v5")); err != nil {
		t.Fatal(err)
	}
	checkMetadata(t, s, "k", nil)
}

func testMetadataConditional(t *testing.T, s objstore.Store) {
	if !keepsMetadata(t, s) {
		t.Skip("the store keeps no metadata")
	}
	ctx := t.Context()
	first := map[string]string{"write-id": "first"}
	etag, err := objstore.PutWithOptions(ctx, s, "idx", []byte("v1"), objstore.PutOptions{IfAbsent: true, Metadata: first})
	if err != nil {
		t.Fatalf("create-only write with metadata: %v", err)
	}
	checkMetadata(t, s, "idx", first)
	_, err = objstore.PutWithOptions(ctx, s, "idx", []byte("other"), objstore.PutOptions{IfAbsent: true, Metadata: map[string]string{"write-id": "loser"}})
	if !errors.Is(err, objstore.ErrPrecondition) {
		t.Fatalf("second create-only write error = %v, want ErrPrecondition", err)
	}
	checkObject(t, s, "idx", []byte("v1"), etag)
	checkMetadata(t, s, "idx", first)

	second := map[string]string{"write-id": "second"}
	etag2, err := objstore.PutWithOptions(ctx, s, "idx", []byte("v2"), objstore.PutOptions{IfMatch: etag, Metadata: second})
	if err != nil {
		t.Fatalf("If-Match write with metadata: %v", err)
	}
	checkObject(t, s, "idx", []byte("v2"), etag2)
	checkMetadata(t, s, "idx", second)
	_, err = objstore.PutWithOptions(ctx, s, "idx", []byte("v3"), objstore.PutOptions{IfMatch: etag, Metadata: map[string]string{"write-id": "stale"}})
	if !errors.Is(err, objstore.ErrPrecondition) {
		t.Fatalf("If-Match write with a stale ETag error = %v, want ErrPrecondition", err)
	}
	checkObject(t, s, "idx", []byte("v2"), etag2)
	checkMetadata(t, s, "idx", second)

	// The same content with new metadata: the ETag names the content, the
	// metadata still changes.
	third := map[string]string{"write-id": "third"}
	etag3, err := objstore.PutWithOptions(ctx, s, "idx", []byte("v2"), objstore.PutOptions{IfMatch: etag2, Metadata: third})
	if err != nil {
		t.Fatalf("If-Match rewrite of the same content: %v", err)
	}
	checkObject(t, s, "idx", []byte("v2"), etag3)
	checkMetadata(t, s, "idx", third)
}

func testMetadataInvalid(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	for _, md := range []map[string]string{
		{"Upper": "x"},
		{"under_score": "x"},
		{"": "x"},
		{"k": "new\nline"},
		{"k": "ünicode"},
		{"k": strings.Repeat("x", objstore.MaxMetadataSize)},
	} {
		if _, err := objstore.PutWithOptions(ctx, s, "bad", []byte("x"), objstore.PutOptions{Metadata: md}); err == nil {
			t.Errorf("PutWithOptions with metadata %.40q succeeded, want an error", md)
		}
	}
	if _, err := s.Head(ctx, "bad"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("after refused writes, Head error = %v, want ErrNotFound", err)
	}
	if _, err := objstore.PutWithOptions(ctx, s, "bad", []byte("x"), objstore.PutOptions{IfAbsent: true, IfMatch: `"e"`}); err == nil {
		t.Error("PutWithOptions with IfAbsent and IfMatch succeeded, want an error")
	}
}

// RunMissingBucket checks that every operation on a store whose bucket
// does not exist fails with ErrBucketNotFound, never ErrNotFound, and
// creates nothing. newMissing returns such a store.
func RunMissingBucket(t *testing.T, newMissing func(t *testing.T) objstore.Store) {
	s := newMissing(t)
	ctx := t.Context()
	md := objstore.PutOptions{Metadata: map[string]string{"write-id": "x"}}
	calls := map[string]func() error{
		"Get":         func() error { _, err := s.Get(ctx, "k", objstore.GetOptions{}); return err },
		"GetIfNone":   func() error { _, err := s.Get(ctx, "k", objstore.GetOptions{IfNoneMatch: `"e"`}); return err },
		"Head":        func() error { _, err := s.Head(ctx, "k"); return err },
		"Put":         func() error { _, err := s.Put(ctx, "k", []byte("x")); return err },
		"PutIfAbsent": func() error { _, err := s.PutIfAbsent(ctx, "k", []byte("x")); return err },
		"PutIfMatch":  func() error { _, err := s.PutIfMatch(ctx, "k", []byte("x"), `"e"`); return err },
		"Delete":      func() error { return s.Delete(ctx, "k", "") },
		"DeleteIf":    func() error { return s.Delete(ctx, "k", `"e"`) },
		"List":        func() error { _, err := s.List(ctx, "", objstore.ListOptions{}); return err },
		"ListAll":     func() error { _, err := objstore.ListAll(ctx, s, "p/"); return err },
		"OpenObject": func() error {
			r, err := objstore.OpenObject(ctx, s, "k", objstore.GetOptions{})
			if err == nil {
				r.Close()
			}
			return err
		},
		"OpenObjectRange": func() error {
			r, err := objstore.OpenObject(ctx, s, "k", objstore.GetOptions{Range: &objstore.Range{Offset: 1, Length: 2}})
			if err == nil {
				r.Close()
			}
			return err
		},
		"WriteObject": func() error {
			_, err := objstore.WriteObject(ctx, s, "k", strings.NewReader("x"), 1, objstore.PutOptions{})
			return err
		},
		"PutWithOptions": func() error { _, err := objstore.PutWithOptions(ctx, s, "k", []byte("x"), md); return err },
		"PutWithOptionsIfAbsent": func() error {
			_, err := objstore.PutWithOptions(ctx, s, "k", []byte("x"), objstore.PutOptions{IfAbsent: true, Metadata: md.Metadata})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, objstore.ErrBucketNotFound) || errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("%s on a missing bucket: error = %v, want ErrBucketNotFound and not ErrNotFound", name, err)
		}
	}
}
