// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package objstoretest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/objstore"
)

// listKeys are accepted by every backend (a directory bucket cannot hold
// both "a" and "a/b"), and chosen so that byte order differs from a naive
// directory walk: "a-x" and "a.y" sort before "a/01" because '-' and '.'
// are below '/', while "a0" and "ab" sort after.
var listKeys = func() []string {
	keys := []string{
		"0", "A", "a-x", "a.y", "a0", "ab", "abc",
		"b/x-", "b/x/y", "b/x/z", "b/x0", "b/xy",
		"c", "c-/d", "c0", "d/e/f/g", "z", "~tilde",
	}
	for i := 1; i <= 12; i++ {
		keys = append(keys, fmt.Sprintf("a/%02d", i))
	}
	slices.Sort(keys)
	return keys
}()

// putListKeys stores every list key with its own name as content.
func putListKeys(t *testing.T, s objstore.Store) {
	t.Helper()
	for _, k := range listKeys {
		mustPut(t, s, k, []byte(k))
	}
}

// withPrefix returns the list keys that start with prefix and sort after
// startAfter, in order.
func withPrefix(prefix, startAfter string) []string {
	var out []string
	for _, k := range listKeys {
		if strings.HasPrefix(k, prefix) && k > startAfter {
			out = append(out, k)
		}
	}
	return out
}

func keysOf(infos []objstore.Info) []string {
	keys := make([]string, len(infos))
	for i, info := range infos {
		keys[i] = info.Key
	}
	return keys
}

func testListOrder(t *testing.T, s objstore.Store) {
	putListKeys(t, s)
	page, err := s.List(t.Context(), "", objstore.ListOptions{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if got := keysOf(page.Objects); !slices.Equal(got, listKeys) {
		t.Errorf("List keys =\n%q\nwant (byte order)\n%q", got, listKeys)
	}
	if page.Truncated {
		t.Errorf("List of %d keys is truncated", len(listKeys))
	}
	for _, info := range page.Objects {
		head, err := s.Head(t.Context(), info.Key)
		if err != nil {
			t.Fatalf("Head(%q): %v", info.Key, err)
		}
		if info.Size != int64(len(info.Key)) || info.ETag != head.ETag {
			t.Errorf("List entry %+v: want size %d and the ETag Head reports (%s)", info, len(info.Key), head.ETag)
		}
	}
}

func testListPrefix(t *testing.T, s objstore.Store) {
	putListKeys(t, s)
	for _, prefix := range []string{"a/", "a", "b/x", "b/x/", "c-", "d/e/f/g", "nope", "a/1", "~"} {
		page, err := s.List(t.Context(), prefix, objstore.ListOptions{})
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		want := withPrefix(prefix, "")
		if got := keysOf(page.Objects); !slices.Equal(got, want) {
			t.Errorf("List(%q) = %q, want %q", prefix, got, want)
		}
		if page.Truncated {
			t.Errorf("List(%q) is truncated", prefix)
		}
	}
}

func testListPaging(t *testing.T, s objstore.Store) {
	putListKeys(t, s)
	for _, tc := range []struct {
		prefix  string
		maxKeys int
	}{{"", 1}, {"", 2}, {"", 7}, {"", len(listKeys)}, {"a/", 5}, {"a", 3}, {"b/", 2}} {
		want := withPrefix(tc.prefix, "")
		var got []string
		opts := objstore.ListOptions{MaxKeys: tc.maxKeys}
		for pages := 0; ; pages++ {
			if pages > len(listKeys)+1 {
				t.Fatalf("List(%q, MaxKeys %d): no end after %d pages", tc.prefix, tc.maxKeys, pages)
			}
			page, err := s.List(t.Context(), tc.prefix, opts)
			if err != nil {
				t.Fatalf("List(%q, %+v): %v", tc.prefix, opts, err)
			}
			if len(page.Objects) > tc.maxKeys {
				t.Fatalf("List(%q, MaxKeys %d) returned %d keys", tc.prefix, tc.maxKeys, len(page.Objects))
			}
			got = append(got, keysOf(page.Objects)...)
			if !page.Truncated {
				break
			}
			if len(page.Objects) == 0 || page.NextStartAfter != page.Objects[len(page.Objects)-1].Key {
				t.Fatalf("List(%q, %+v): truncated page %q has NextStartAfter %q, want its last key",
					tc.prefix, opts, keysOf(page.Objects), page.NextStartAfter)
			}
			opts.StartAfter = page.NextStartAfter
		}
		if !slices.Equal(got, want) {
			t.Errorf("paging List(%q) by %d = %q, want %q", tc.prefix, tc.maxKeys, got, want)
		}
	}
}

func testListStartAfter(t *testing.T, s objstore.Store) {
	putListKeys(t, s)
	for _, tc := range []struct{ prefix, after string }{
		{"", "a/05"},
		{"a/", "a/05"},
		{"a/", "a/055"}, // not a key: continue with the next greater one
		{"", "b/x/"},
		{"", "a"},
		{"", "~tilde"}, // the last key: nothing follows
		{"b/", "a"},    // before the prefix: the whole prefix
	} {
		page, err := s.List(t.Context(), tc.prefix, objstore.ListOptions{StartAfter: tc.after})
		if err != nil {
			t.Fatalf("List(%q, StartAfter %q): %v", tc.prefix, tc.after, err)
		}
		want := withPrefix(tc.prefix, tc.after)
		if got := keysOf(page.Objects); !slices.Equal(got, want) {
			t.Errorf("List(%q, StartAfter %q) = %q, want %q", tc.prefix, tc.after, got, want)
		}
	}
}

func testListAll(t *testing.T, s objstore.Store) {
	var want []string
	for i := range 1100 {
		want = append(want, fmt.Sprintf("many/%04d", i))
	}
	// Write concurrently: over a thousand synced writes take seconds in a row.
	const writers = 16
	errs := race(writers, func(w int) error {
		for i := w; i < len(want); i += writers {
			if _, err := s.Put(t.Context(), want[i], nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "other", nil)
	all, err := objstore.ListAll(t.Context(), s, "many/")
	if err != nil {
		t.Fatalf("ListAll: %v", err)
	}
	if got := keysOf(all); !slices.Equal(got, want) {
		t.Errorf("ListAll(many/) returned %d keys, want %d in order", len(got), len(want))
	}
}
