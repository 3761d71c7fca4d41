// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dryrun_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/builtins/dryrun"
	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/cloud/local"
	"podmin.dev/podmin/internal/paths"
)

func newEnv(t *testing.T) *builtins.Env {
	dir := t.TempDir()
	dirs := paths.Dirs{Config: filepath.Join(dir, "config"), Cache: filepath.Join(dir, "cache"), Data: filepath.Join(dir, "data")}
	work := filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	return &builtins.Env{Dirs: dirs, Providers: map[string]cloud.Provider{"local": local.New(dirs.Data)}, WorkDir: work}
}

func summary(cs []dryrun.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Action+" "+c.Kind+" "+c.Target)
	}
	return out
}

// TestConnectIsRecordedNotPerformed runs the real connect over the
// recording boundaries: the bucket, its tags and the context exist only in
// the overlay, and connect's probe object (written and deleted) is no
// change.
func TestConnectIsRecordedNotPerformed(t *testing.T) {
	env := newEnv(t)
	rec, denv, err := dryRun(env)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	ctx := context.Background()
	from := rec.Mark()
	res, err := denv.Connect(ctx, builtins.ConnectOptions{Cluster: "demo", Provider: "local", Bucket: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.BucketCreated || !res.BucketOwned {
		t.Fatalf("connect result %+v", res)
	}
	got := summary(rec.Changes(from, rec.Mark()))
	want := []string{"created bucket demo", "updated bucket-tags demo", "created contexts contexts.json"}
	if !slices.Equal(got, want) {
		t.Fatalf("changes %q, want %q", got, want)
	}
	if c, err := denv.CurrentContext(); err != nil || c.Cluster != "demo" {
		t.Fatalf("the dry run's current context = %v, %v", c, err)
	}
	if _, err := env.CurrentContext(); err == nil {
		t.Fatal("the real contexts file got a current context")
	}
	if _, err := os.Stat(filepath.Join(env.Dirs.Data, "buckets", "demo")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the real bucket exists: %v", err)
	}
	if _, err := os.Stat(env.Dirs.Config); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the config directory was created: %v", err)
	}
}

// TestFilesAreRecordedNotWritten drives init and preview's file writes.
func TestFilesAreRecordedNotWritten(t *testing.T) {
	env := newEnv(t)
	if err := os.WriteFile(filepath.Join(env.WorkDir, "taken.yaml"), []byte("real"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, denv, err := dryRun(env)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	m := builtins.ManifestOptions{Name: "web", NodeGroup: "workers", Images: []string{"hello:v1"}}
	if _, err := denv.Init(builtins.InitOptions{ManifestOptions: m, File: "taken.yaml"}); err == nil {
		t.Fatal("init overwrote an existing file in the dry run")
	}
	if _, err := denv.Init(builtins.InitOptions{ManifestOptions: m, File: "missing-dir/web.yaml"}); err == nil {
		t.Fatal("init wrote into a missing directory in the dry run")
	}
	if _, err := denv.Init(builtins.InitOptions{ManifestOptions: m, File: "web.yaml"}); err != nil {
		t.Fatal(err)
	}
	if res, err := denv.Init(builtins.InitOptions{ManifestOptions: m, File: "web.yaml"}); err != nil || res.Action != builtins.InitUnchanged {
		t.Fatalf("init of the same manifest over the file it planned: %+v, %v; want unchanged", res, err)
	}
	m2 := m
	m2.Images = []string{"hello:v2"}
	if _, err := denv.Init(builtins.InitOptions{ManifestOptions: m2, File: "web.yaml"}); err == nil {
		t.Fatal("init replaced the different file it planned without --force")
	}
	ex, err := denv.Validate(builtins.ValidateOptions{File: "web.yaml"})
	if err != nil || ex.Name != "web" {
		t.Fatalf("validate of the planned file: %v", err)
	}
	files := denv.Files
	if err := files.MkdirAll(filepath.Join(env.WorkDir, "out", "pods"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := files.WriteFile(filepath.Join(env.WorkDir, "out", "pods", "a.yaml"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	rc, err := files.Open(filepath.Join(env.WorkDir, "out", "pods", "a.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "a" {
		t.Fatalf("read back %q", b)
	}
	entries, _ := os.ReadDir(env.WorkDir)
	if len(entries) != 1 {
		t.Fatalf("the dry run wrote into the working directory: %v", entries)
	}
	got := summary(rec.Changes(0, 0))
	want := []string{
		"created file " + filepath.Join(env.WorkDir, "web.yaml"),
		"created directory " + filepath.Join(env.WorkDir, "out"),
		"created directory " + filepath.Join(env.WorkDir, "out", "pods"),
		"created file " + filepath.Join(env.WorkDir, "out", "pods", "a.yaml"),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("changes %q, want %q", got, want)
	}
}

// A dry run's disconnect records the removal of the cluster's generated
// module and leaves it in place.
func TestDryRunDisconnectKeepsTheModule(t *testing.T) {
	env := newEnv(t)
	if _, err := env.Connect(t.Context(), builtins.ConnectOptions{Cluster: "demo", Provider: "local", Bucket: "demo"}); err != nil {
		t.Fatal(err)
	}
	module := filepath.Join(env.Dirs.Cache, "infrastructure", "demo")
	if err := os.MkdirAll(module, 0o700); err != nil {
		t.Fatal(err)
	}
	rec, denv, err := dryRun(env)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	if _, err := denv.Disconnect(builtins.DisconnectOptions{Cluster: "demo"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(module); err != nil {
		t.Fatalf("a dry run removed the module: %v", err)
	}
	got := summary(rec.Changes(0, 0))
	if !slices.Contains(got, "deleted directory "+module) {
		t.Fatalf("changes %q lack the module's removal", got)
	}
}

// dryRun is dryrun.New over the composed environment the operations run
// in.
func dryRun(env *builtins.Env) (*dryrun.Recorder, *builtins.Env, error) {
	rec, denv, err := dryrun.New((*openv.Env)(env))
	return rec, (*builtins.Env)(denv), err
}
