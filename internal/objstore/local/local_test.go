// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package local_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/objstore/objstoretest"
)

// newBucket creates an empty bucket in a fresh temporary directory.
func newBucket(tb testing.TB) *local.Bucket {
	tb.Helper()
	b := local.Open(filepath.Join(tb.TempDir(), "bucket"))
	if err := b.CreateBucket(tb.Context()); err != nil {
		tb.Fatalf("CreateBucket: %v", err)
	}
	return b
}

func TestConformance(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		objstoretest.Run(t, func(t *testing.T) objstore.Store { return newBucket(t) })
	})
	t.Run("local/missing bucket", func(t *testing.T) {
		objstoretest.RunMissingBucket(t, func(t *testing.T) objstore.Store {
			return local.Open(filepath.Join(t.TempDir(), "absent"))
		})
	})
	t.Run("local/directory without .podmin", func(t *testing.T) {
		objstoretest.RunMissingBucket(t, func(t *testing.T) objstore.Store {
			dir := filepath.Join(t.TempDir(), "plain")
			if err := os.MkdirAll(filepath.Join(dir, "p"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "k"), []byte("a file"), 0o600); err != nil {
				t.Fatal(err)
			}
			return local.Open(dir)
		})
	})
	t.Run("local/faultstore", func(t *testing.T) {
		objstoretest.Run(t, func(t *testing.T) objstore.Store { return faultstore.New(newBucket(t)) })
	})
}

func BenchmarkObjstoreLocal(b *testing.B) {
	objstoretest.RunBenchmarks(b, func(b *testing.B) objstore.Store { return newBucket(b) })
}

// tree lists every file below dir as slash-separated relative paths.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLayout(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t)
	if _, err := b.Put(ctx, "a/b/c", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(b.Dir(), "a", "b", "c"))
	if err != nil || string(got) != "hello" {
		t.Fatalf("file a/b/c = %q, %v; want %q", got, err, "hello")
	}
	var objects []string
	for _, p := range tree(t, b.Dir()) {
		if !strings.HasPrefix(p, ".podmin/") {
			objects = append(objects, p)
		}
	}
	if want := []string{"a/", "a/b/", "a/b/c"}; !slices.Equal(objects, want) {
		t.Errorf("bucket directory holds %q, want %q", objects, want)
	}
	if tmp := tree(t, filepath.Join(b.Dir(), ".podmin", "tmp")); len(tmp) != 0 {
		t.Errorf(".podmin/tmp holds %q after a write, want nothing", tmp)
	}
	if err := b.Delete(ctx, "a/b/c", ""); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(b.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != ".podmin" {
		t.Errorf("after deleting the only object the bucket holds %v, want only .podmin", entries)
	}
}

func TestETagIsQuotedSHA256(t *testing.T) {
	etag, err := newBucket(t).Put(t.Context(), "k", []byte("abc"))
	if err != nil {
		t.Fatal(err)
	}
	const want = `"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"`
	if etag != want {
		t.Errorf("ETag = %s, want %s", etag, want)
	}
}

func TestFileWrittenByHand(t *testing.T) {
	b := newBucket(t)
	if err := os.WriteFile(filepath.Join(b.Dir(), "by-hand"), []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	obj, err := b.Get(t.Context(), "by-hand", objstore.GetOptions{})
	if err != nil || string(obj.Data) != "abc" {
		t.Fatalf("Get = %q, %v", obj.Data, err)
	}
	if _, err := b.PutIfMatch(t.Context(), "by-hand", []byte("x"), obj.ETag); err != nil {
		t.Errorf("PutIfMatch with the ETag of a hand-written file: %v", err)
	}
}

func TestBadKeys(t *testing.T) {
	long := strings.Repeat("k", 1025)
	tests := []struct{ key, want string }{
		{"", "invalid key: key is empty"},
		{"/abs", `invalid key: key "/abs" starts with "/": keys are relative to the bucket`},
		{"a//b", `invalid key: key "a//b" has an empty path segment: remove the repeated or trailing "/"`},
		{"a/", `invalid key: key "a/" has an empty path segment: remove the repeated or trailing "/"`},
		{"a/./b", `invalid key: key "a/./b" has a "." path segment`},
		{"../up", `invalid key: key "../up" has a ".." path segment`},
		{".podmin/tags.json", `invalid key: key ".podmin/tags.json" is inside .podmin, which a local bucket reserves for its metadata`},
		{".podmin", `invalid key: key ".podmin" is inside .podmin, which a local bucket reserves for its metadata`},
		{"nul\x00", `invalid key: key "nul\x00" contains a NUL byte`},
		{long, `invalid key: key "` + long[:32] + `"… is 1025 bytes long: keys are at most 1024 bytes`},
		{strings.Repeat("s", 256), `invalid key: key "` + strings.Repeat("s", 256) + `" has a path segment longer than 255 bytes`},
	}
	b := newBucket(t)
	for _, tc := range tests {
		_, err := b.Put(t.Context(), tc.key, []byte("x"))
		if !errors.Is(err, local.ErrInvalidKey) {
			t.Errorf("Put(%.40q) error = %v, want ErrInvalidKey", tc.key, err)
			continue
		}
		if want := "put " + strconv.Quote(tc.key) + ": " + tc.want; err.Error() != want {
			t.Errorf("Put(%.40q) error =\n%s\nwant\n%s", tc.key, err, want)
		}
		if _, err := b.Get(t.Context(), tc.key, objstore.GetOptions{}); !errors.Is(err, local.ErrInvalidKey) {
			t.Errorf("Get(%.40q) error = %v, want ErrInvalidKey", tc.key, err)
		}
	}
	// Keys that look odd but are fine.
	for _, key := range []string{"a/.podmin", ".hidden", "a/..b", "x/y z/ü", strings.Repeat("s", 255), strings.Repeat("a/", 511) + "aa"} {
		if _, err := b.Put(t.Context(), key, []byte("x")); err != nil {
			t.Errorf("Put(%.40q): %v", key, err)
		}
	}
}

// TestChangedBehindTheStore checks that the ETag and metadata kept for an
// object are not trusted once the file was replaced or edited by hand.
func TestChangedBehindTheStore(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t)
	etag, err := objstore.PutWithOptions(ctx, b, "k", []byte("version one"), objstore.PutOptions{Metadata: map[string]string{"write-id": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	written := etag
	p := filepath.Join(b.Dir(), "k")
	edits := []struct {
		name string
		edit func() error
	}{
		{"same size, in place", func() error {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteAt([]byte("VERSION"), 0)
			return err
		}},
		{"replaced by rename", func() error {
			tmp := filepath.Join(b.Dir(), "..", "elsewhere")
			if err := os.WriteFile(tmp, []byte("another content"), 0o600); err != nil {
				return err
			}
			return os.Rename(tmp, p)
		}},
		{"same content, new inode", func() error {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.WriteFile(p, data, 0o600)
		}},
	}
	for _, e := range edits {
		if err := e.edit(); err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		want := `"` + hex.EncodeToString(sum[:]) + `"`
		info, err := b.Head(ctx, "k")
		if err != nil || info.ETag != want || len(info.Metadata) != 0 {
			t.Errorf("%s: Head = %s %v, %v; want ETag %s and no metadata", e.name, info.ETag, info.Metadata, err, want)
		}
		if info.ETag == written {
			t.Errorf("%s: Head still reports the ETag of the version the store wrote", e.name)
		}
		obj, err := b.Get(ctx, "k", objstore.GetOptions{})
		if err != nil || obj.ETag != want || !bytes.Equal(obj.Data, data) {
			t.Errorf("%s: Get = %q %s, %v; want %q %s", e.name, obj.Data, obj.ETag, err, data, want)
		}
		etag = want
	}
	if _, err := b.PutIfMatch(ctx, "k", []byte("stored again"), etag); err != nil {
		t.Errorf("PutIfMatch with the ETag of a hand-edited file: %v", err)
	}
}

func BenchmarkStreamLocal(b *testing.B) {
	objstoretest.RunStreamBenchmarks(b, func(b *testing.B) objstore.Store { return newBucket(b) })
}

func BenchmarkCopyBaseline(b *testing.B) {
	objstoretest.RunCopyBaseline(b)
}

// TestHeadTrustsTheRecord shows that HEAD and a ranged read do not read the
// object: content changed in place with size, inode and modification time
// kept is not noticed (the record's documented limit), whereas any change
// of those is (TestChangedBehindTheStore).
func TestHeadTrustsTheRecord(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t)
	data := bytes.Repeat([]byte("podmin"), 1<<20/6)
	etag, err := b.Put(ctx, "blob", data)
	if err != nil {
		t.Fatal(err)
	}
	objstoretest.EditInPlace(t, filepath.Join(b.Dir(), "blob"), 600, []byte("PODMIN"), true)
	info, err := b.Head(ctx, "blob")
	if err != nil || info.ETag != etag {
		t.Fatalf("Head = %s, %v; want the recorded ETag %s without reading the file", info.ETag, err, etag)
	}
	r, err := b.Open(ctx, "blob", objstore.GetOptions{Range: &objstore.Range{Offset: 600, Length: 100}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil || string(got[:6]) != "PODMIN" || len(got) != 100 || r.Info.ETag != etag {
		t.Fatalf("ranged read = %q…(%d bytes) ETag %s, %v", got[:min(len(got), 6)], len(got), r.Info.ETag, err)
	}
}

// TestFailedWritesLeaveNoTemporaryFiles checks that a write that fails
// (wrong size, cancelled) removes its temporary file.
func TestFailedWritesLeaveNoTemporaryFiles(t *testing.T) {
	b := newBucket(t)
	data := bytes.Repeat([]byte("x"), 3<<20)
	if _, err := b.Write(t.Context(), "k", bytes.NewReader(data[:1<<20]), int64(len(data)), objstore.PutOptions{}); !errors.Is(err, objstore.ErrSizeMismatch) {
		t.Fatalf("short body error = %v, want ErrSizeMismatch", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := b.Write(ctx, "k", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled write error = %v, want context.Canceled", err)
	}
	if tmp := tree(t, filepath.Join(b.Dir(), ".podmin", "tmp")); len(tmp) != 0 {
		t.Errorf(".podmin/tmp holds %q after failed writes, want nothing", tmp)
	}
	if _, err := b.Head(t.Context(), "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Head after failed writes error = %v, want ErrNotFound", err)
	}
}

// TestRecordsFollowObjects checks that records come and go with their
// objects, and that a bucket without an objects folder (made by an older
// version) gets one on its first write.
func TestRecordsFollowObjects(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t)
	records := filepath.Join(b.Dir(), ".podmin", "objects")
	if err := os.RemoveAll(records); err != nil {
		t.Fatal(err)
	}
	md := objstore.PutOptions{Metadata: map[string]string{"write-id": "w"}}
	for i := range 3 {
		key := "k/" + strconv.Itoa(i)
		if _, err := objstore.PutWithOptions(ctx, b, key, []byte("v1"), md); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Put(ctx, key, bytes.Repeat([]byte("v2"), 100<<10)); err != nil {
			t.Fatal(err)
		}
		if _, err := objstore.PutWithOptions(ctx, b, key, []byte("v3"), md); err != nil {
			t.Fatal(err)
		}
	}
	files := 0
	for _, p := range tree(t, records) {
		if !strings.HasSuffix(p, "/") {
			files++
		}
	}
	if files != 3 {
		t.Errorf("records after rewrites: %q, want one file per object", tree(t, records))
	}
	for i := range 3 {
		if err := b.Delete(ctx, "k/"+strconv.Itoa(i), ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range tree(t, records) {
		if !strings.HasSuffix(p, "/") || strings.Count(p, "/") > 1 {
			t.Errorf("after deleting every object, records folder holds %s", p)
		}
	}
}

// An edit in place right after a write, in the same tick of the file
// system's clock, with the size kept, still changes the file's identity:
// the store stamps what it writes with a modification time no later write
// gets. Without the stamp a fast edit kept the recorded ETag.
func TestEditRightAfterWriteIsNoticed(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t)
	p := filepath.Join(b.Dir(), "blob")
	for i := range 50 {
		data := bytes.Repeat([]byte{byte('a' + i%26)}, 4096)
		before := time.Now()
		if _, err := b.Put(ctx, "blob", data); err != nil {
			t.Fatal(err)
		}
		info, err := b.Head(ctx, "blob")
		if err != nil {
			t.Fatal(err)
		}
		if lag := before.Sub(info.LastModified); lag < time.Second || lag > 3*time.Second {
			t.Fatalf("LastModified %v is %v before the write began, want the two-second stamp", info.LastModified, lag)
		}
		objstoretest.EditInPlace(t, p, 2048, []byte("X"), false)
		edited := slices.Clone(data)
		edited[2048] = 'X'
		sum := sha256.Sum256(edited)
		want := `"` + hex.EncodeToString(sum[:]) + `"`
		info, err = b.Head(ctx, "blob")
		if err != nil || info.ETag != want {
			t.Fatalf("round %d: Head after an edit in place = %s, %v; want the edited content's ETag %s", i, info.ETag, err, want)
		}
		f2, finfo, err := b.OpenFile(ctx, "blob")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(f2)
		f2.Close()
		if finfo.ETag != want || !bytes.Equal(got, edited) {
			t.Fatalf("round %d: OpenFile = %s, want %s over the bytes it returns", i, finfo.ETag, want)
		}
	}
}

// A file written behind the store's back is recorded only once it is older
// than the stamp lag: until then every read hashes it, so an edit within
// the same clock tick cannot hide behind a record.
func TestFreshForeignFileIsNotRecorded(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t)
	p := filepath.Join(b.Dir(), "hand")
	if err := os.WriteFile(p, []byte("written by hand"), 0o644); err != nil {
		t.Fatal(err)
	}
	records := func() int {
		n := 0
		_ = filepath.WalkDir(filepath.Join(b.Dir(), ".podmin", "objects"), func(_ string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				n++
			}
			return nil
		})
		return n
	}
	if _, err := b.Head(ctx, "hand"); err != nil {
		t.Fatal(err)
	}
	if n := records(); n != 0 {
		t.Fatalf("a file modified just now was recorded (%d records)", n)
	}
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Head(ctx, "hand"); err != nil {
		t.Fatal(err)
	}
	if n := records(); n != 1 {
		t.Fatalf("a file a minute old was not recorded after its first read (%d records)", n)
	}
}
