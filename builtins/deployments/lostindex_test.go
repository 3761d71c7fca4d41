// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deployments

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	ctxops "podmin.dev/podmin/builtins/contexts"
	"podmin.dev/podmin/builtins/manifests"
	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/builtins/openv/openvtest"
	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/state"
)

// connectedLocal connects env to a fresh local bucket and returns the
// bucket as a store of its own, to change behind the operations' backs.
func connectedLocal(t *testing.T, env *openv.Env) objstore.Store {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bucket")
	if _, err := ctxops.Connect(t.Context(), env, ctxops.ConnectOptions{Cluster: "demo", Provider: "local", Bucket: dir}); err != nil {
		t.Fatal(err)
	}
	return localstore.Open(dir)
}

func deployBuiltIn(t *testing.T, env *openv.Env, name, image string) DeployResult {
	t.Helper()
	res, err := Deploy(t.Context(), env, DeployOptions{ManifestOptions: manifests.ManifestOptions{Name: name, NodeGroup: "workers", Images: []string{image}}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestLostIndexWhileWaiting: an index that vanishes during a wait is lost,
// not the deployment deleted.
func TestLostIndexWhileWaiting(t *testing.T) {
	env := openvtest.NewEnv(t)
	b := connectedLocal(t, env)
	deployBuiltIn(t, env, "web", "hello:v1")
	lw := newLeaderWriter(t, env, b)
	env.Sleep = func(ctx context.Context, _ time.Duration) error {
		lw.advance(time.Second)
		return b.Delete(ctx, state.IndexPath, "")
	}
	_, err := Wait(t.Context(), env, WaitOptions{Name: "web", NodeGroup: "workers"})
	if !errors.Is(err, state.ErrIndexMissing) || errors.Is(err, ErrNoDeployment) {
		t.Fatalf("wait while the index vanished: %v, want ErrIndexMissing", err)
	}
}
