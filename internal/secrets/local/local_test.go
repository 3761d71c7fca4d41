// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package local_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/secrets/local"
	"podmin.dev/podmin/internal/secrets/secretstest"
)

// countEntries counts the files and directories below root: the local
// store's "calls" are changes on disk.
func countEntries(t *testing.T, root string) func() int {
	return func() int {
		n := 0
		_ = filepath.WalkDir(root, func(string, fs.DirEntry, error) error { n++; return nil })
		return n
	}
}

func TestConformance(t *testing.T) {
	secretstest.Run(t, func(t *testing.T) secretstest.Target {
		root := filepath.Join(t.TempDir(), "secrets")
		return secretstest.Target{Store: local.New(root), Calls: countEntries(t, root)}
	})
}

func TestFilesOnDisk(t *testing.T) {
	root := t.TempDir()
	s := local.New(root)
	n, _ := secrets.PodSecret("demo", "", "web", "db-password")
	if err := s.Create(t.Context(), n, secrets.Value("on-disk")); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "demo", "default", "web", "db-password")
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("value file %s: %v %v, want mode 0600", p, st, err)
	}
	if st, err := os.Stat(filepath.Dir(p)); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("Pod directory: %v %v, want mode 0700", st, err)
	}
	// A crashed write's temporary file is not a secret.
	tmp := filepath.Join(filepath.Dir(p), ".db-password.tmp-123")
	if err := os.WriteFile(tmp, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	short, err := paths.CreateTemp(filepath.Dir(p))
	if err != nil {
		t.Fatal(err)
	}
	_ = short.Close()
	entries, err := s.List(t.Context(), "demo", secrets.Filter{})
	if err != nil || len(entries) != 1 || entries[0].Name != "/demo/default/web/db-password" {
		t.Fatalf("List = %+v, %v", entries, err)
	}
	_ = os.Remove(tmp)
	_ = os.Remove(short.Name())
	if err := s.Destroy(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "demo", "default", "web")); err == nil {
		t.Errorf("Destroy left the empty Pod directory")
	}
}

// TestLongKey creates, lists and reads keys as long as the key rules allow:
// the temporary file of the atomic write has a short fixed name, so only
// the final file name carries the key.
func TestLongKey(t *testing.T) {
	root := t.TempDir()
	s := local.New(root)
	for _, n := range []int{250, 255} {
		key := strings.Repeat("k", n-1) + "z"
		name, err := secrets.PodSecret("demo", "", "web", key)
		if err != nil {
			t.Fatalf("%d-character key rejected: %v", n, err)
		}
		if err := s.Create(t.Context(), name, secrets.Value("long")); err != nil {
			t.Fatalf("create a %d-character key: %v", n, err)
		}
		if err := s.Update(t.Context(), name, secrets.Value("longer")); err != nil {
			t.Fatalf("update a %d-character key: %v", n, err)
		}
		v, err := s.Read(t.Context(), name)
		if err != nil || string(v) != "longer" {
			t.Fatalf("read a %d-character key: %q, %v", n, v, err)
		}
	}
	entries, err := s.List(t.Context(), "demo", secrets.Filter{})
	if err != nil || len(entries) != 2 {
		t.Fatalf("List = %+v, %v; want the two long keys", entries, err)
	}
}

// The create nonce lives outside the cluster's directory: no listing shows
// it and an agent reading the secret's file reads only the value.
func TestCreateNonceIsKeptApart(t *testing.T) {
	root := t.TempDir()
	s := local.New(root)
	n, err := secrets.InternalSecret("demo", secrets.WorkloadCAKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateWithNonce(t.Context(), n, secrets.Value("key"), "n0nce"); err != nil {
		t.Fatal(err)
	}
	var files []string
	_ = filepath.WalkDir(filepath.Join(root, "demo"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != ".lock" {
			files = append(files, strings.TrimPrefix(p, root))
		}
		return nil
	})
	if len(files) != 1 || files[0] != "/demo/_system/workload-ca-key" {
		t.Fatalf("files in the cluster's directory: %q", files)
	}
	if b, err := os.ReadFile(filepath.Join(root, "demo", "_system", "workload-ca-key")); err != nil || string(b) != "key" {
		t.Fatalf("value file: %q, %v", b, err)
	}
	if got, err := s.CreateNonce(t.Context(), n); err != nil || got != "n0nce" {
		t.Fatalf("CreateNonce = %q, %v", got, err)
	}
	// A record that cannot be read is an error, never "no nonce".
	p := filepath.Join(root, ".create-nonces", "demo", "_system", "workload-ca-key")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	if got, err := s.CreateNonce(t.Context(), n); err == nil || errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("unreadable record: %q, %v; want an error", got, err)
	}
}
