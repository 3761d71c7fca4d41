// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/state"
)

// BenchmarkColdReconcile1000of10000 is a freshly started agent publishing
// a NodeGroup of 1,000 deployments (half with a Service) from a
// 10,000-entry index in the local store: index read, 1,500 payload reads
// and verifications, transformation, 1,000 fsynced renames.
func BenchmarkColdReconcile1000of10000(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	ix := state.NewIndex()
	for i := range 10_000 {
		ng := fmt.Sprintf("ng%d", i%10)
		if i%10 == 0 {
			ng = "workers"
		}
		name := fmt.Sprintf("app-%05d", i)
		data, err := manifest.Build(manifest.BuildOptions{Name: name, NodeGroup: ng, Images: []string{"app:v1"}, Service: i%20 == 0})
		if err != nil {
			b.Fatal(err)
		}
		ex, err := manifest.Extract(data, manifest.ExtractOptions{})
		if err != nil {
			b.Fatal(err)
		}
		e := state.Entry{}
		if e.Pod, err = state.PodPayloadPath(ng, ex.PodYAML); err != nil {
			b.Fatal(err)
		}
		if ng == "workers" {
			if _, err := f.bucket.PutIfAbsent(ctx, e.Pod, ex.PodYAML); err != nil {
				b.Fatal(err)
			}
		}
		if ex.Service != nil {
			if e.Service, err = state.ServicePayloadPath(ex.Namespace, ex.Service.Name, ex.ServiceYAML); err != nil {
				b.Fatal(err)
			}
			if _, err := f.bucket.PutIfAbsent(ctx, e.Service, ex.ServiceYAML); err != nil {
				b.Fatal(err)
			}
		}
		k, _ := state.NewKey(ng, name)
		if _, _, err := ix.Set(k, e); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := f.bucket.Put(ctx, state.IndexPath, ix.Encode()); err != nil {
		b.Fatal(err)
	}
	base := b.TempDir()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		f.root = filepath.Join(base, fmt.Sprint(i))
		res := mustReconcile(b, f.reconciler(b, nil))
		if res.Pods != 1000 || res.Written != 1000 {
			b.Fatalf("%+v", res)
		}
	}
}
