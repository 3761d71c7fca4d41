// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package local_test

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
)

func TestKeyConflicts(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t)
	if _, err := b.Put(ctx, "a/b", []byte("file")); err != nil {
		t.Fatal(err)
	}
	_, err := b.PutIfAbsent(ctx, "a/b/c", []byte("x"))
	want := `put-if-absent "a/b/c": invalid key: "a/b" is an object, so "a/b/c" cannot be stored under it: a local bucket cannot hold a key and keys below it`
	if !errors.Is(err, local.ErrInvalidKey) || err.Error() != want {
		t.Errorf("PutIfAbsent(a/b/c) over object a/b error =\n%v\nwant\n%s", err, want)
	}
	if _, err := b.Put(ctx, "x/y/z", []byte("deep")); err != nil {
		t.Fatal(err)
	}
	_, err = b.Put(ctx, "x/y", []byte("x"))
	want = `put "x/y": invalid key: "x/y" is a prefix of other keys (x/y/...): a local bucket cannot hold a key and keys below it`
	if !errors.Is(err, local.ErrInvalidKey) || err.Error() != want {
		t.Errorf("Put(x/y) over x/y/z error =\n%v\nwant\n%s", err, want)
	}
	// A directory is not an object.
	if _, err := b.Get(ctx, "x/y", objstore.GetOptions{}); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Get(x/y) error = %v, want ErrNotFound", err)
	}
	if _, err := b.Get(ctx, "a/b/c", objstore.GetOptions{}); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Get(a/b/c) error = %v, want ErrNotFound", err)
	}
	if err := b.Delete(ctx, "x/y", ""); err != nil {
		t.Errorf("Delete(x/y) = %v, want success", err)
	}
	if err := b.Delete(ctx, "x/y", `"etag"`); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Delete(x/y, etag) error = %v, want ErrNotFound", err)
	}
	// An empty directory left behind is reused as the place of an object.
	if err := os.MkdirAll(filepath.Join(b.Dir(), "left", "over"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, "left/over", []byte("x")); err != nil {
		t.Errorf("Put over an empty directory: %v", err)
	}
}

func TestMissingKeyErrors(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t)
	if _, err := b.PutIfMatch(ctx, "nope", []byte("x"), `"e"`); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("PutIfMatch(missing) error = %v, want ErrNotFound", err)
	}
	err := b.Delete(ctx, "nope", `"e"`)
	if !errors.Is(err, objstore.ErrNotFound) || err.Error() != `delete "nope": object not found` {
		t.Errorf("Delete(missing, etag) error = %v, want ErrNotFound naming the key", err)
	}
	// ETags match with or without quotes, as in S3.
	etag, _ := b.Put(ctx, "k", []byte("v"))
	if _, err := b.PutIfMatch(ctx, "k", []byte("w"), strings.Trim(etag, `"`)); err != nil {
		t.Errorf("PutIfMatch with an unquoted ETag: %v", err)
	}
}

func TestMissingBucket(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "parent", "bucket")
	b := local.Open(dir)
	if ok, err := b.BucketExists(ctx); ok || err != nil {
		t.Errorf("BucketExists = %v, %v; want false, nil", ok, err)
	}
	want := `local bucket directory "` + dir + `" does not exist (bucket not found): check the bucket name, or create the bucket first`
	checks := map[string]error{}
	_, checks["Get"] = b.Get(ctx, "k", objstore.GetOptions{})
	_, checks["Head"] = b.Head(ctx, "k")
	_, checks["Put"] = b.Put(ctx, "k", nil)
	_, checks["PutIfAbsent"] = b.PutIfAbsent(ctx, "k", nil)
	_, checks["PutIfMatch"] = b.PutIfMatch(ctx, "k", nil, `"e"`)
	checks["DeleteIfMatch"] = b.Delete(ctx, "k", `"e"`)
	_, checks["Open"] = b.Open(ctx, "k", objstore.GetOptions{})
	_, checks["Write"] = b.Write(ctx, "k", strings.NewReader("x"), 1, objstore.PutOptions{Metadata: map[string]string{"a": "b"}})
	_, checks["List"] = b.List(ctx, "", objstore.ListOptions{})
	checks["Delete"] = b.Delete(ctx, "k", "")
	_, checks["BucketTags"] = b.BucketTags(ctx)
	checks["SetBucketTags"] = b.SetBucketTags(ctx, map[string]string{"a": "b"})
	_, checks["BucketRegion"] = b.BucketRegion(ctx)
	for op, err := range checks {
		if !errors.Is(err, objstore.ErrBucketNotFound) || errors.Is(err, objstore.ErrNotFound) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s on a missing bucket: error = %v, want ErrBucketNotFound (not ErrNotFound) saying %q", op, err, want)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("operations on a missing bucket created %s", dir)
	}

	if err := b.CreateBucket(ctx); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	for _, d := range []string{dir, filepath.Join(dir, ".podmin")} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want a 0700 directory", d, fi, err)
		}
	}
	if ok, err := b.BucketExists(ctx); !ok || err != nil {
		t.Errorf("BucketExists after CreateBucket = %v, %v; want true, nil", ok, err)
	}
	if err := b.CreateBucket(ctx); !errors.Is(err, objstore.ErrBucketExists) {
		t.Errorf("second CreateBucket error = %v, want ErrBucketExists", err)
	}
	if r, err := b.BucketRegion(ctx); r != "local" || err != nil {
		t.Errorf("BucketRegion = %q, %v; want local", r, err)
	}
}

func TestBucketIsAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	b := local.Open(file)
	if ok, err := b.BucketExists(t.Context()); ok || err == nil {
		t.Errorf("BucketExists on a file = %v, %v; want false and an error", ok, err)
	}
	if err := b.CreateBucket(t.Context()); err == nil || errors.Is(err, objstore.ErrBucketExists) {
		t.Errorf("CreateBucket on a file error = %v, want an error that is not ErrBucketExists", err)
	}
}

func TestBucketTags(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t)
	tags, err := b.BucketTags(ctx)
	if err != nil || len(tags) != 0 {
		t.Fatalf("BucketTags of a new bucket = %v, %v; want none", tags, err)
	}
	want := map[string]string{"podmin:cluster": "prod", "owner": "ops"}
	if err := b.SetBucketTags(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := b.BucketTags(ctx)
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("BucketTags = %v, %v; want %v", got, err, want)
	}
	name := filepath.Join(b.Dir(), ".podmin", "tags.json")
	fi, err := os.Stat(name)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("tags file: %v, %v; want mode 0600", fi, err)
	}
	raw, _ := os.ReadFile(name)
	var onDisk map[string]string
	if err := json.Unmarshal(raw, &onDisk); err != nil || !maps.Equal(onDisk, want) {
		t.Errorf("tags.json = %s (%v), want %v", raw, err, want)
	}
	if err := b.SetBucketTags(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := b.BucketTags(ctx); err != nil || len(got) != 0 {
		t.Errorf("BucketTags after clearing = %v, %v; want none", got, err)
	}
	page, err := b.List(ctx, "", objstore.ListOptions{})
	if err != nil || len(page.Objects) != 0 {
		t.Errorf("List shows %v, %v; want no objects (tags are metadata)", page.Objects, err)
	}
	if err := os.WriteFile(name, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := b.BucketTags(ctx); err == nil || !strings.Contains(err.Error(), "is corrupt: fix or delete it") {
		t.Errorf("BucketTags with a corrupt file error = %v", err)
	}
}

// TestCreateBucketAdoptsDirectory checks that a directory without .podmin is
// no bucket until CreateBucket adopts it, files and all, without reporting
// it as created.
func TestCreateBucketAdoptsDirectory(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "existing")
	if err := os.MkdirAll(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "file"), []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := local.Open(dir)
	if ok, err := b.BucketExists(ctx); ok || err != nil {
		t.Fatalf("BucketExists of a directory without .podmin = %v, %v; want false, nil", ok, err)
	}
	_, err := b.Get(ctx, "a/file", objstore.GetOptions{})
	if !errors.Is(err, objstore.ErrBucketNotFound) || !strings.Contains(err.Error(), "has no .podmin folder") {
		t.Fatalf("Get before adoption error = %v, want ErrBucketNotFound naming .podmin", err)
	}
	// Adopted, but reported as existing: Podmin did not create it, so no
	// caller may claim it.
	if err := b.CreateBucket(ctx); !errors.Is(err, objstore.ErrBucketExists) || !strings.Contains(err.Error(), "adopted the existing directory") {
		t.Fatalf("CreateBucket of an existing directory error = %v, want ErrBucketExists saying it was adopted", err)
	}
	obj, err := b.Get(ctx, "a/file", objstore.GetOptions{})
	const abc = `"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"`
	if err != nil || string(obj.Data) != "abc" || obj.ETag != abc {
		t.Fatalf("Get after adoption = %q %s, %v; want abc with ETag %s", obj.Data, obj.ETag, err, abc)
	}
	if err := b.CreateBucket(ctx); !errors.Is(err, objstore.ErrBucketExists) {
		t.Errorf("CreateBucket of an adopted bucket error = %v, want ErrBucketExists", err)
	}
	if ok, err := b.BucketExists(ctx); !ok || err != nil {
		t.Errorf("BucketExists after adoption = %v, %v; want true", ok, err)
	}
}
