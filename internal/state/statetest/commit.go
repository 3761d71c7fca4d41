// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package statetest

import (
	"context"
	"testing"

	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// Commit deploys a built-in deployment of name with image (and a Service
// when service is set) to NodeGroup nodegroup through the ordinary commit
// path, failing the test on any error; it returns the index entry.
func Commit(t testing.TB, b objstore.Store, nodegroup, name, image string, service bool) state.Entry {
	t.Helper()
	data, err := manifest.Build(manifest.BuildOptions{Name: name, NodeGroup: nodegroup, Images: []string{image}, Service: service})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := manifest.Extract(data, manifest.ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k, err := state.NewKey(nodegroup, name)
	if err != nil {
		t.Fatal(err)
	}
	d := state.Deployment{Key: k, Namespace: ex.Namespace, Pod: ex.PodYAML}
	if ex.Service != nil {
		d.ServiceName, d.Service = ex.Service.Name, ex.ServiceYAML
	}
	res, err := state.NewCommitter(b, state.CommitOptions{}).Deploy(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	return res.Entry
}
