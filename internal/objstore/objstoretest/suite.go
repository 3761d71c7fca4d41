// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package objstoretest

import (
	"bytes"
	"errors"
	"testing"

	"podmin.dev/podmin/internal/objstore"
)

// Run runs the conformance suite. newStore must return a fresh, empty store
// for each sub-test and arrange its cleanup with t.Cleanup.
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store)
	}{
		{"GetHeadMissing", testGetHeadMissing},
		{"PutGet", testPutGet},
		{"PutOverwrites", testPutOverwrites},
		{"EmptyObject", testEmptyObject},
		{"LargeObject", testLargeObject},
		{"GetIfNoneMatch", testGetIfNoneMatch},
		{"PutIfAbsent", testPutIfAbsent},
		{"PutIfMatch", testPutIfMatch},
		{"Delete", testDelete},
		{"DeleteIfMatch", testDeleteIfMatch},
		{"ListOrder", testListOrder},
		{"ListPrefix", testListPrefix},
		{"ListPaging", testListPaging},
		{"ListStartAfter", testListStartAfter},
		{"ListAll", testListAll},
		{"RacePutIfAbsent", testRacePutIfAbsent},
		{"RacePutIfMatch", testRacePutIfMatch},
		{"RaceCounter", testRaceCounter},
		{"RaceDeleteIfMatch", testRaceDeleteIfMatch},
	}
	tests = append(tests, metadataTests...)
	tests = append(tests, streamTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

func testGetHeadMissing(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	if _, err := s.Get(ctx, "missing/key", objstore.GetOptions{}); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Get(missing) error = %v, want ErrNotFound", err)
	}
	if _, err := s.Head(ctx, "missing/key"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Head(missing) error = %v, want ErrNotFound", err)
	}
}

func testPutGet(t *testing.T, s objstore.Store) {
	data := []byte("hello, podmin")
	etag := mustPut(t, s, "dir/hello.txt", data)
	if etag == "" {
		t.Fatal("Put returned an empty ETag")
	}
	checkObject(t, s, "dir/hello.txt", data, etag)
	info, err := s.Head(t.Context(), "dir/hello.txt")
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	if info.Key != "dir/hello.txt" || info.Size != int64(len(data)) || info.LastModified.IsZero() {
		t.Errorf("Head = %+v, want key dir/hello.txt, size %d and a modification time", info, len(data))
	}
}

func testPutOverwrites(t *testing.T, s objstore.Store) {
	mustPut(t, s, "k", []byte("first"))
	etag := mustPut(t, s, "k", []byte("second, longer"))
	checkObject(t, s, "k", []byte("second, longer"), etag)
}

func testEmptyObject(t *testing.T, s objstore.Store) {
	etag := mustPut(t, s, "empty", nil)
	checkObject(t, s, "empty", nil, etag)
}

func testLargeObject(t *testing.T, s objstore.Store) {
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	etag := mustPut(t, s, "large/object.bin", data)
	checkObject(t, s, "large/object.bin", data, etag)
}

func testGetIfNoneMatch(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	stale := mustPut(t, s, "k", []byte("v1"))
	cur := mustPut(t, s, "k", []byte("v2"))
	if _, err := s.Get(ctx, "k", objstore.GetOptions{IfNoneMatch: cur}); !errors.Is(err, objstore.ErrNotModified) {
		t.Errorf("Get(IfNoneMatch: current) error = %v, want ErrNotModified", err)
	}
	obj, err := s.Get(ctx, "k", objstore.GetOptions{IfNoneMatch: stale})
	if err != nil {
		t.Fatalf("Get(IfNoneMatch: stale): %v", err)
	}
	if string(obj.Data) != "v2" || obj.ETag != cur {
		t.Errorf("Get(IfNoneMatch: stale) = %q %s, want %q %s", obj.Data, obj.ETag, "v2", cur)
	}
}

func testPutIfAbsent(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	etag, err := s.PutIfAbsent(ctx, "once", []byte("original"))
	if err != nil {
		t.Fatalf("PutIfAbsent(new key): %v", err)
	}
	checkObject(t, s, "once", []byte("original"), etag)
	if _, err := s.PutIfAbsent(ctx, "once", []byte("overwrite")); !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("PutIfAbsent(existing) error = %v, want ErrPrecondition", err)
	}
	checkObject(t, s, "once", []byte("original"), etag)
}

func testPutIfMatch(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	v1 := mustPut(t, s, "cas", []byte("v1"))
	v2, err := s.PutIfMatch(ctx, "cas", []byte("v2"), v1)
	if err != nil {
		t.Fatalf("PutIfMatch(current ETag): %v", err)
	}
	checkObject(t, s, "cas", []byte("v2"), v2)
	if _, err := s.PutIfMatch(ctx, "cas", []byte("v3"), v1); !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("PutIfMatch(stale ETag) error = %v, want ErrPrecondition", err)
	}
	checkObject(t, s, "cas", []byte("v2"), v2)
	_, err = s.PutIfMatch(ctx, "absent", []byte("x"), v1)
	if !errors.Is(err, objstore.ErrNotFound) && !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("PutIfMatch(missing key) error = %v, want ErrNotFound or ErrPrecondition", err)
	}
	if _, err := s.Head(ctx, "absent"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("after PutIfMatch(missing key), Head error = %v, want ErrNotFound", err)
	}
}

func testDelete(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	mustPut(t, s, "a/gone", []byte("x"))
	mustPut(t, s, "a/kept", []byte("y"))
	if err := s.Delete(ctx, "a/gone", ""); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Get(ctx, "a/gone", objstore.GetOptions{}); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Get after Delete error = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "a/gone", ""); err != nil {
		t.Errorf("Delete(missing) = %v, want success", err)
	}
	if err := s.Delete(ctx, "never/existed", ""); err != nil {
		t.Errorf("Delete(never existed) = %v, want success", err)
	}
	checkObject(t, s, "a/kept", []byte("y"), "")
}

func testDeleteIfMatch(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	stale := mustPut(t, s, "k", []byte("v1"))
	cur := mustPut(t, s, "k", []byte("v2"))
	if err := s.Delete(ctx, "k", stale); !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("Delete(stale ETag) error = %v, want ErrPrecondition", err)
	}
	checkObject(t, s, "k", []byte("v2"), cur)
	if err := s.Delete(ctx, "k", cur); err != nil {
		t.Fatalf("Delete(current ETag): %v", err)
	}
	if _, err := s.Head(ctx, "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Head after Delete(current ETag) error = %v, want ErrNotFound", err)
	}
	err := s.Delete(ctx, "k", cur)
	if !errors.Is(err, objstore.ErrNotFound) && !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("Delete(missing, ETag) error = %v, want ErrNotFound or ErrPrecondition", err)
	}
}

// mustPut writes data unconditionally and returns the ETag.
func mustPut(t testing.TB, s objstore.Store, key string, data []byte) string {
	t.Helper()
	etag, err := s.Put(t.Context(), key, data)
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	return etag
}

// checkObject asserts key's content and, when etag is set, that Get and
// Head report it.
func checkObject(t *testing.T, s objstore.Store, key string, data []byte, etag string) {
	t.Helper()
	obj, err := s.Get(t.Context(), key, objstore.GetOptions{})
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if !bytes.Equal(obj.Data, data) {
		t.Errorf("Get(%q) data = %q (%d bytes), want %q (%d bytes)", key, abbrev(obj.Data), len(obj.Data), abbrev(data), len(data))
	}
	info, err := s.Head(t.Context(), key)
	if err != nil {
		t.Fatalf("Head(%q): %v", key, err)
	}
	if info.Size != int64(len(data)) {
		t.Errorf("Head(%q) size = %d, want %d", key, info.Size, len(data))
	}
	if info.ETag != obj.ETag {
		t.Errorf("Head(%q) ETag = %s, Get ETag = %s; want equal", key, info.ETag, obj.ETag)
	}
	if etag != "" && obj.ETag != etag {
		t.Errorf("Get(%q) ETag = %s, want the write's ETag %s", key, obj.ETag, etag)
	}
}

// abbrev shortens data for error messages.
func abbrev(data []byte) string {
	if len(data) > 40 {
		return string(data[:40]) + "…"
	}
	return string(data)
}
