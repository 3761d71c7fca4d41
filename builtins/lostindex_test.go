// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/state"
)

// connectedLocal connects env to a fresh local bucket and returns the
// bucket as a store of its own, to change behind the operations' backs.
func connectedLocal(t *testing.T, env *Env) objstore.Store {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bucket")
	if _, err := env.Connect(t.Context(), ConnectOptions{Cluster: "demo", Provider: "local", Bucket: dir}); err != nil {
		t.Fatal(err)
	}
	return localstore.Open(dir)
}

func bucketKeys(t *testing.T, s objstore.Store) []string {
	t.Helper()
	all, err := objstore.ListAll(t.Context(), s, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range all {
		out = append(out, o.Key)
	}
	return out
}

func deployBuiltIn(t *testing.T, env *Env, name, image string) DeployResult {
	t.Helper()
	res, err := env.Deploy(t.Context(), DeployOptions{ManifestOptions: ManifestOptions{Name: name, NodeGroup: "workers", Images: []string{image}}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestLostIndexRefusedByEveryBuiltIn: once deployments/index.json is gone
// from a bucket that holds Pod payloads, deploy, delete and uninstall
// refuse before writing, and list, status, preview and wait report the
// index missing instead of an empty cluster. A new cluster is unaffected.
func TestLostIndexRefusedByEveryBuiltIn(t *testing.T) {
	ctx := t.Context()
	env := testEnv(t)
	// A wait that polls instead of refusing ends at once.
	env.Sleep = func(context.Context, time.Duration) error { return errors.New("the wait polled") }
	b := connectedLocal(t, env)
	if l, err := env.List(ctx); err != nil || len(l) != 0 {
		t.Fatalf("list of a new cluster: %+v, %v", l, err)
	}
	if res, err := env.Status(ctx, StatusOptions{}); err != nil || res.IndexMissing {
		t.Fatalf("status of a new cluster: %+v, %v", res, err)
	}
	if res, err := env.Delete(ctx, DeleteOptions{Name: "web", NodeGroup: "workers"}); err != nil || res.Action != "absent" {
		t.Fatalf("delete in a new cluster: %+v, %v", res, err)
	}
	for _, n := range []string{"web", "api", "db"} {
		deployBuiltIn(t, env, n, "hello:v1")
	}
	if err := b.Delete(ctx, state.IndexPath, ""); err != nil {
		t.Fatal(err)
	}
	before := bucketKeys(t, b)
	missing := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, state.ErrIndexMissing) || !strings.Contains(err.Error(), `run "podmin index rebuild"`) {
			t.Errorf("%s over a lost index: %v, want ErrIndexMissing pointing at podmin index rebuild", what, err)
		}
	}
	_, err := env.Deploy(ctx, DeployOptions{ManifestOptions: ManifestOptions{Name: "new", NodeGroup: "workers", Images: []string{"hello:v1"}}})
	missing("deploy", err)
	_, err = env.Deploy(ctx, DeployOptions{ManifestOptions: ManifestOptions{Name: "web", NodeGroup: "workers", Images: []string{"hello:v1"}}, Wait: UntilReady})
	missing("deploy --wait", err)
	_, err = env.Delete(ctx, DeleteOptions{Name: "web", NodeGroup: "workers"})
	missing("delete", err)
	_, err = env.UninstallCloudflared(ctx, UninstallCloudflaredOptions{NodeGroup: "workers"})
	missing("uninstall cloudflared", err)
	_, err = env.List(ctx)
	missing("list", err)
	res, err := env.Status(ctx, StatusOptions{})
	missing("status", err)
	if !res.IndexMissing || res.Bucket == "" || res.NodeGroups == nil {
		t.Errorf("status result over a lost index: %+v", res)
	}
	_, err = env.Status(ctx, StatusOptions{NodeGroup: "workers", Name: "web"})
	missing("status NAME", err)
	if errors.Is(err, ErrNoDeployment) {
		t.Errorf("status NAME over a lost index says the deployment is not committed: %v", err)
	}
	_, err = env.Preview(ctx, PreviewOptions{NodeGroup: "workers"})
	missing("preview", err)
	_, err = env.Wait(ctx, WaitOptions{Name: "web", NodeGroup: "workers"})
	missing("wait", err)
	if after := bucketKeys(t, b); !slices.Equal(before, after) {
		t.Fatalf("the refused operations wrote to the bucket:\nbefore %q\nafter  %q", before, after)
	}

	// The way back.
	rb, err := env.RebuildIndex(ctx, IndexRebuildOptions{})
	if err != nil || !rb.Written || len(rb.Entries) != 3 {
		t.Fatalf("rebuild of the lost index: %+v, %v", rb, err)
	}
	deployBuiltIn(t, env, "new", "hello:v1")
	if l, err := env.List(ctx); err != nil || len(l) != 4 {
		t.Fatalf("list after the rebuild: %+v, %v", l, err)
	}
	if _, err := env.RebuildIndex(ctx, IndexRebuildOptions{}); !errors.Is(err, state.ErrIndexValid) {
		t.Fatalf("rebuild of a valid index: %v, want ErrIndexValid", err)
	}
}
