// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"context"
	"testing"

	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/state"
)

// extracted runs the real manifest extraction for the built-in DaemonSet.
func extracted(t *testing.T, name, ns string, service bool) state.Deployment {
	t.Helper()
	ds, err := manifest.Build(manifest.BuildOptions{
		Name: name, NodeGroup: "workers", Namespace: ns,
		Images: []string{"registry.podmin.internal/apps/example/web:v1"}, Service: service,
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := manifest.Extract(ds, manifest.ExtractOptions{Name: name, NodeGroup: "workers"})
	if err != nil {
		t.Fatal(err)
	}
	d := state.Deployment{
		Key:       state.Key{NodeGroup: r.NodeGroup, Name: r.Name},
		Namespace: r.Namespace,
		Pod:       r.PodYAML,
		Service:   r.ServiceYAML,
	}
	if r.Service != nil {
		d.ServiceName = r.Service.Name
	}
	return d
}

// The canonical payloads of the real extraction commit as they are, and the
// namespace of a replaced deployment is read back from its real Pod payload.
func TestDeployExtractedManifest(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	c := committer(b, 4)
	res, err := c.Deploy(ctx, extracted(t, "web", "product", true))
	if err != nil || res.Outcome != state.Created {
		t.Fatalf("%+v, %v", res, err)
	}
	if id, ok := res.Entry.ServiceID(); !ok || id.String() != "product/web" {
		t.Fatalf("Service identity %v, %v", id, ok)
	}
	if res, err := c.Deploy(ctx, extracted(t, "web", "product", true)); err != nil || res.Outcome != state.Unchanged {
		t.Fatalf("re-extracted identical deployment: %+v, %v", res, err)
	}
	if _, err := c.Deploy(ctx, extracted(t, "web", "team-a", false)); err != nil {
		t.Fatal(err)
	}
	res, err = c.Deploy(ctx, extracted(t, "web", manifest.DefaultNamespace, false))
	if err != nil || res.Replaced == nil || res.Replaced.Namespace != "team-a" {
		t.Fatalf("replacement: %+v, %v", res, err)
	}
	checkBucket(t, b)
}
