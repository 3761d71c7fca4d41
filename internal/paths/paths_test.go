// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package paths

import (
	"os"
	"path/filepath"
	"testing"
)

func envOf(goos, home string, vars map[string]string) Env {
	return Env{GOOS: goos, Home: home, Getenv: func(k string) string { return vars[k] }}
}

func TestResolveTable(t *testing.T) {
	all := map[string]string{
		"XDG_CONFIG_HOME": "/x/config", "XDG_CACHE_HOME": "/x/cache",
		"XDG_DATA_HOME": "/x/data", "XDG_RUNTIME_DIR": "/x/run",
	}
	tests := []struct {
		name string
		goos string
		vars map[string]string
		want Dirs
	}{
		{"linux defaults", "linux", nil, Dirs{
			Config: "/home/u/.config/podmin", Cache: "/home/u/.cache/podmin",
			Data: "/home/u/.local/share/podmin", Runtime: "/home/u/.podmin/run"}},
		{"linux xdg", "linux", all, Dirs{
			Config: "/x/config/podmin", Cache: "/x/cache/podmin", Data: "/x/data/podmin", Runtime: "/x/run/podmin"}},
		{"darwin defaults", "darwin", nil, Dirs{
			Config: "/home/u/.podmin/config", Cache: "/home/u/.podmin/cache",
			Data: "/home/u/.podmin/data", Runtime: "/home/u/.podmin/run"}},
		{"darwin explicit xdg wins", "darwin", all, Dirs{
			Config: "/x/config/podmin", Cache: "/x/cache/podmin", Data: "/x/data/podmin", Runtime: "/x/run/podmin"}},
		{"windows one xdg", "windows", map[string]string{"XDG_CACHE_HOME": "/x/cache"}, Dirs{
			Config: "/home/u/.podmin/config", Cache: "/x/cache/podmin",
			Data: "/home/u/.podmin/data", Runtime: "/home/u/.podmin/run"}},
		{"relative xdg ignored", "linux", map[string]string{"XDG_CONFIG_HOME": "rel"}, Dirs{
			Config: "/home/u/.config/podmin", Cache: "/home/u/.cache/podmin",
			Data: "/home/u/.local/share/podmin", Runtime: "/home/u/.podmin/run"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(envOf(tc.goos, "/home/u", tc.vars))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestResolveNoHome(t *testing.T) {
	if _, err := Resolve(envOf("linux", "", nil)); err == nil {
		t.Fatal("expected an error without a home directory")
	}
	all := map[string]string{"XDG_CONFIG_HOME": "/a", "XDG_CACHE_HOME": "/b", "XDG_DATA_HOME": "/c", "XDG_RUNTIME_DIR": "/d"}
	if _, err := Resolve(envOf("linux", "", all)); err != nil {
		t.Fatalf("all XDG variables set needs no home: %v", err)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.json")
	if err := WriteFileAtomic(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(p, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "two" {
		t.Fatalf("read back %q, %v", b, err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
}

func TestWriteFileAtomicUnwritable(t *testing.T) {
	if os.Geteuid() == 0 {
		// root ignores directory permissions; model it with a missing parent.
		err := WriteFileAtomic(filepath.Join(t.TempDir(), "missing", "f"), []byte("x"), 0o600)
		if err == nil {
			t.Fatal("expected an error for a missing parent directory")
		}
		return
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "f"), []byte("x"), 0o600); err == nil {
		t.Fatal("expected an error in a read-only directory")
	}
}
