// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package cache_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/internal/cache"
)

func TestPutGetVerifies(t *testing.T) {
	c := cache.Open(t.TempDir(), 0)
	data := []byte("apiVersion: v1\nkind: Pod\n")
	d := cache.Sum(data)
	if _, ok := c.Get(d); ok {
		t.Fatal("hit in an empty cache")
	}
	if err := c.Put(d, []byte("other bytes")); !errors.Is(err, cache.ErrDigestMismatch) {
		t.Fatalf("Put of bytes under a foreign digest: %v", err)
	}
	if _, ok := c.Get(d); ok {
		t.Fatal("mismatched bytes were stored")
	}
	if err := c.Put(d, data); err != nil {
		t.Fatal(err)
	}
	got, ok := c.Get(d)
	if !ok || !bytes.Equal(got, data) {
		t.Fatalf("Get = %q, %v", got, ok)
	}
	if err := c.Put("../../etc/passwd", data); err == nil {
		t.Fatal("Put accepted a path as digest")
	}
}

// A file corrupted on disk is a miss, is removed, and can be stored again.
func TestCorruptFileIsAMiss(t *testing.T) {
	dir := t.TempDir()
	c := cache.Open(dir, 0)
	data := []byte("payload")
	d := cache.Sum(data)
	if err := c.Put(d, data); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "sha512", d[:2], d)
	if err := os.WriteFile(p, []byte("bit rot"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, ok := c.Get(d); ok {
		t.Fatalf("corrupt file returned %q", got)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("corrupt file kept: %v", err)
	}
	if err := c.Put(d, data); err != nil {
		t.Fatal(err)
	}
	if got, ok := c.Get(d); !ok || !bytes.Equal(got, data) {
		t.Fatalf("after repair: %q, %v", got, ok)
	}
}

// The cache stays within its bound and evicts the least recently used
// objects first.
func TestSizeBound(t *testing.T) {
	dir := t.TempDir()
	clock := time.Unix(1_700_000_000, 0)
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	const bound = 10 << 10
	c := cache.Open(dir, bound, cache.WithClock(now))
	var digests []string
	for i := range 40 {
		data := bytes.Repeat([]byte{byte('a' + i%26)}, 1000)
		data = append(data, fmt.Sprint(i)...)
		d := cache.Sum(data)
		digests = append(digests, d)
		if err := c.Put(d, data); err != nil {
			t.Fatal(err)
		}
		// Keep object 0 hot, and give the file times a clear order.
		p := filepath.Join(dir, "sha512", d[:2], d)
		ts := now()
		_ = os.Chtimes(p, ts, ts)
		if _, ok := c.Get(digests[0]); !ok && i < 5 {
			t.Fatalf("object 0 evicted early at %d", i)
		}
	}
	if err := c.Prune(); err != nil {
		t.Fatal(err)
	}
	if n := dirBytes(t, dir); n > bound {
		t.Fatalf("cache holds %d bytes, bound %d", n, bound)
	}
	if _, ok := c.Get(digests[0]); !ok {
		t.Error("the most recently used object was evicted")
	}
	if _, ok := c.Get(digests[1]); ok {
		t.Error("an old unused object survived")
	}
	if _, ok := c.Get(digests[39]); !ok {
		t.Error("the newest object was evicted")
	}
}

func dirBytes(t *testing.T, dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}

// Several processes writing and reading the same objects never see a
// partial or wrong object: each child process hammers one shared directory
// and fails on any hit whose bytes are not the object's.
func TestConcurrentProcesses(t *testing.T) {
	if dir := os.Getenv("PODMIN_CACHE_CHILD_DIR"); dir != "" {
		child(t, dir)
		return
	}
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^TestConcurrentProcesses$", "-test.count=1")
			cmd.Env = append(os.Environ(), "PODMIN_CACHE_CHILD_DIR="+dir, "PODMIN_CACHE_CHILD_SEED="+strconv.Itoa(i))
			out, err := cmd.CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("child %d: %v\n%s", i, err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Each process checks the size after writing a tenth of the bound.
	if n, max := dirBytes(t, dir), int64(64<<10+len(errs)*(64<<10)/10); n > max {
		t.Fatalf("shared cache holds %d bytes, more than %d", n, max)
	}
}

func object(i int) []byte { return bytes.Repeat(fmt.Appendf(nil, "object %d;", i), 300) }

func child(t *testing.T, dir string) {
	seed, _ := strconv.Atoi(os.Getenv("PODMIN_CACHE_CHILD_SEED"))
	// A small bound forces evictions to race with reads and writes.
	c := cache.Open(dir, 64<<10)
	for round := range 400 {
		i := (round*7 + seed*13) % 50
		data := object(i)
		d := cache.Sum(data)
		if got, ok := c.Get(d); ok && !bytes.Equal(got, data) {
			t.Fatalf("object %d: wrong bytes", i)
		}
		if err := c.Put(d, data); err != nil {
			t.Fatal(err)
		}
		if round%50 == 0 {
			if err := c.Prune(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Notes are stored per object and name, replaced by a later value, and
// removed when Prune evicts their object.
func TestNotes(t *testing.T) {
	dir := t.TempDir()
	clock := time.Unix(1_700_000_000, 0)
	c := cache.Open(dir, 3000, cache.WithClock(func() time.Time { clock = clock.Add(time.Second); return clock }))
	old := bytes.Repeat([]byte("o"), 1000)
	od := cache.Sum(old)
	if _, ok := c.Note(od, "where"); ok {
		t.Fatal("note before any was set")
	}
	if err := c.SetNote("../../etc", "where", "x"); err == nil {
		t.Fatal("SetNote accepted a path as digest")
	}
	if err := c.SetNote(od, "where", strings.Repeat("x", 5000)); err == nil {
		t.Fatal("SetNote accepted a note larger than the bound")
	}
	if err := c.Put(od, old); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"bucket a", "bucket b"} {
		if err := c.SetNote(od, "where", v); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetNote(od, "other\nname", "v"); err != nil {
		t.Fatal(err)
	}
	if v, ok := c.Note(od, "where"); !ok || v != "bucket b" {
		t.Fatalf("Note = %q, %v; want the later value", v, ok)
	}
	if v, ok := c.Note(od, "other\nname"); !ok || v != "v" {
		t.Fatalf("second note = %q, %v", v, ok)
	}
	// Newer objects push the old one out; its notes go with it.
	for i := range 4 {
		data := bytes.Repeat([]byte{byte('a' + i)}, 1000)
		if err := c.Put(cache.Sum(data), data); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Prune(); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get(od); ok {
		t.Fatal("the oldest object survived the bound")
	}
	if v, ok := c.Note(od, "where"); ok {
		t.Fatalf("the evicted object's note survived: %q", v)
	}
}
