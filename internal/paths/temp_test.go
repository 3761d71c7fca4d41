// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package paths

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteFileAtomicLongName writes files whose names are at the usual
// 255-byte limit: the temporary name must not grow with the final one.
func TestWriteFileAtomicLongName(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{1, 250, 255} {
		name := strings.Repeat("k", n)
		p := filepath.Join(dir, name)
		if err := WriteFileAtomic(p, []byte("v"), 0o444); err != nil {
			t.Fatalf("%d-byte name: %v", n, err)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != "v" {
			t.Fatalf("%d-byte name: read %q, %v", n, b, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Fatalf("directory holds %d entries, want the 3 files and no temporary ones", len(entries))
	}
}

func TestCreateTemp(t *testing.T) {
	dir := t.TempDir()
	seen := map[string]bool{}
	for range 64 {
		f, err := CreateTemp(dir)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(f.Name())
		_ = f.Close()
		if len(base) != TempNameLen || !IsTemp(base) || seen[base] {
			t.Fatalf("temporary name %q: length %d (want %d), IsTemp %v, repeated %v", base, len(base), TempNameLen, IsTemp(base), seen[base])
		}
		seen[base] = true
	}
	for _, name := range []string{"web.yaml", ".web.yaml.tmp-123", ".~tmp-0123456789abcdeF", ".~tmp-0123", "~tmp-0123456789abcdef"} {
		if IsTemp(name) {
			t.Errorf("IsTemp(%q) = true", name)
		}
	}
}
