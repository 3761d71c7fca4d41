// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins/openv/openvtest"
)

func TestInitIsIdempotent(t *testing.T) {
	env := openvtest.NewEnv(t)
	env.WorkDir = t.TempDir()
	opts := InitOptions{ManifestOptions: ManifestOptions{Name: "web", NodeGroup: "workers", Images: []string{"hello:v1"}, Service: true}, File: "web.yaml"}
	path := filepath.Join(env.WorkDir, "web.yaml")

	res, err := Init(env, opts)
	if err != nil || res.Action != InitCreated || res.File != "web.yaml" {
		t.Fatalf("first init = %+v, %v", res, err)
	}
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(first), "{}") {
		t.Errorf("init wrote an empty object:\n%s", first)
	}
	before, _ := os.Stat(path)

	res, err = Init(env, opts)
	if err != nil || res.Action != InitUnchanged {
		t.Fatalf("second init = %+v, %v", res, err)
	}
	if after, _ := os.Stat(path); !after.ModTime().Equal(before.ModTime()) || !os.SameFile(before, after) {
		t.Error("an unchanged init rewrote the file")
	}

	other := opts
	other.Images = []string{"hello:v2"}
	_, err = Init(env, other)
	want := path + ` already exists and holds a different manifest: init left it as it is; compare it with "podmin validate -f web.yaml", then remove it, pass --force to replace it, or pass --file with another path`
	if err == nil || err.Error() != want {
		t.Fatalf("init with other options: %v\nwant %s", err, want)
	}
	if got, _ := os.ReadFile(path); string(got) != string(first) {
		t.Fatal("a refused init changed the file")
	}

	// A file that starts like the manifest but is longer also differs.
	if err := os.WriteFile(path, append(first, "# note\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Init(env, opts); err == nil || !strings.Contains(err.Error(), "holds a different manifest") {
		t.Fatalf("init over a longer file: %v", err)
	}

	other.Force = true
	res, err = Init(env, other)
	if err != nil || res.Action != InitReplaced {
		t.Fatalf("init --force = %+v, %v", res, err)
	}
	if got, _ := os.ReadFile(path); !strings.Contains(string(got), "image: registry.podmin.internal/apps/hello:v2\n") {
		t.Fatalf("init --force wrote:\n%s", got)
	}
}

func TestInitRefusesWhatIsNotAFile(t *testing.T) {
	env := openvtest.NewEnv(t)
	env.WorkDir = t.TempDir()
	if err := os.Mkdir(filepath.Join(env.WorkDir, "dir.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(env.WorkDir, "target.yaml")
	if err := os.Symlink(target, filepath.Join(env.WorkDir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"dir.yaml", "link.yaml"} {
		opts := InitOptions{ManifestOptions: ManifestOptions{Name: "web", NodeGroup: "workers", Images: []string{"hello:v1"}}, File: file, Force: true}
		_, err := Init(env, opts)
		if err == nil || !strings.Contains(err.Error(), "is not a regular file: init left it as it is") {
			t.Errorf("init -f %s: %v", file, err)
		}
	}
	if _, err := os.Lstat(target); err == nil {
		t.Error("init wrote through a symlink")
	}
}
