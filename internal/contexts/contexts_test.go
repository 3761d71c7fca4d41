// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package contexts

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestUpdateLoadRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "podmin")
	err := Update(dir, func(f *File) error {
		f.Contexts["demo"] = Context{Cluster: "demo", Provider: "local", Region: "local", Bucket: "b", SecretsProvider: "local"}
		f.Current = "demo"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("contexts file mode: %v %v", st, err)
	}
	f, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.CurrentContext()
	if err != nil || c.Bucket != "b" {
		t.Fatalf("current = %+v, %v", c, err)
	}
}

func TestFailedUpdateWritesNothing(t *testing.T) {
	dir := t.TempDir()
	boom := errors.New("boom")
	if err := Update(dir, func(f *File) error { f.Current = "x"; return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); !os.IsNotExist(err) {
		t.Fatalf("file written after a failed update: %v", err)
	}
}

func TestConcurrentUpdatesLoseNothing(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("c%d", i)
			if err := Update(dir, func(f *File) error {
				f.Contexts[name] = Context{Cluster: name}
				return nil
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	f, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Contexts) != 16 {
		t.Fatalf("got %d contexts, want 16", len(f.Contexts))
	}
}

func TestErrors(t *testing.T) {
	f := &File{Contexts: map[string]Context{}}
	if _, err := f.CurrentContext(); !errors.Is(err, ErrNoContext) {
		t.Fatalf("err = %v", err)
	}
	if _, err := f.Lookup("x"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("err = %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil {
		t.Fatal("corrupt file accepted")
	}
	// A config "directory" below a regular file cannot be created, even by root.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Update(filepath.Join(file, "podmin"), func(*File) error { return nil }); err == nil {
		t.Fatal("update under a regular file succeeded")
	}
}

func TestNonces(t *testing.T) {
	a, b := NewNonce(), NewNonce()
	if len(a) != 64 || a == b || !ProvenBy(a, a) {
		t.Fatalf("nonces %q and %q", a, b)
	}
	for _, tc := range []struct{ want, got string }{
		{a, b}, {a, ""}, {"", ""}, {a, a[:63]}, {strings.ToUpper(a), strings.ToUpper(a)}, {a + "0", a + "0"},
	} {
		if ProvenBy(tc.want, tc.got) {
			t.Errorf("ProvenBy(%q, %q) = true", tc.want, tc.got)
		}
	}
}
