// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// deploy commits a built-in deployment of NodeGroup workers.
func deploy(t testing.TB, store objstore.Store, name, namespace string, service bool) {
	t.Helper()
	deployTo(t, store, "workers", name, namespace, service)
}

// deployTo commits a built-in deployment of NodeGroup ng.
func deployTo(t testing.TB, store objstore.Store, ng, name, namespace string, service bool) {
	t.Helper()
	data, err := manifest.Build(manifest.BuildOptions{Name: name, NodeGroup: ng, Namespace: namespace, Images: []string{"hello:v1"}, Service: service})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := manifest.Extract(data, manifest.ExtractOptions{Name: name, NodeGroup: ng})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := state.NewKey(ng, name)
	d := state.Deployment{Key: k, Namespace: ex.Namespace, Pod: ex.PodYAML}
	if ex.Service != nil {
		d.ServiceName, d.Service = ex.Service.Name, ex.ServiceYAML
	}
	if _, err := state.NewCommitter(store, state.CommitOptions{}).Deploy(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

func TestIndexServices(t *testing.T) {
	store := newBucket(t)
	services := coordinator.IndexServices(store)
	if got, err := services(t.Context()); err != nil || len(got) != 0 {
		t.Fatalf("Services of a missing index = %v, %v", got, err)
	}
	deploy(t, store, "web", "product", true)
	deploy(t, store, "batch", "product", false)
	deploy(t, store, "api", "edge", true)
	got, err := services(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b coordinator.IndexService) int {
		return strings.Compare(a.ID.Namespace+"/"+a.ID.Name, b.ID.Namespace+"/"+b.ID.Name)
	})
	want := []coordinator.IndexService{{ID: coordinator.ServiceID{Namespace: "edge", Name: "api"}, NodeGroup: "workers"},
		{ID: coordinator.ServiceID{Namespace: "product", Name: "web"}, NodeGroup: "workers"}}
	if !slices.Equal(got, want) {
		t.Errorf("Services = %v, want %v", got, want)
	}
}

// BenchmarkCommitToFile measures commit → static-Pod file on each of three
// local agents, with the leader's index hints and by polling alone. The
// poll interval is scaled from the agent's 10 s to 1 s to keep the run
// short; without hints the latency is bounded by it.
func BenchmarkCommitToFile(b *testing.B) {
	for _, hints := range []bool{true, false} {
		b.Run(map[bool]string{true: "hints", false: "poll"}[hints], func(b *testing.B) { benchCommitToFile(b, hints) })
	}
}

func benchCommitToFile(b *testing.B, hints bool) {
	const poll = time.Second
	store := newBucket(b)
	agents := startLocal(b, store, 3, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var roots []string
	for _, a := range agents {
		root := b.TempDir()
		roots = append(roots, filepath.Join(root, filepath.FromSlash(nodepod.ManifestsDir)))
		rec, err := staticpod.New(staticpod.Options{Store: store, Cluster: "local", NodeGroup: "workers", Root: root})
		if err != nil {
			b.Fatal(err)
		}
		loop := staticpod.NewLoop(rec, staticpod.LoopOptions{Interval: poll})
		a.mu.Lock()
		a.onHint = loop.Trigger
		a.mu.Unlock()
		go loop.Run(ctx)
	}
	eventually(b, 5*time.Second, "a leader", func() bool { n, _ := leaderOf(agents); return n == 1 })
	count := func(dir string) int {
		entries, _ := os.ReadDir(dir)
		n := 0
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".yaml") && !strings.HasPrefix(e.Name(), ".") {
				n++
			}
		}
		return n
	}
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		deploy(b, store, fmt.Sprintf("app-%d", i), "default", false)
		committed := time.Now()
		if hints {
			// Best effort, as from a deploy: any agent forwards to the leader.
			_ = agents[i%3].coord.NotifyIndexChanged(ctx, "")
		}
		pending := slices.Clone(roots)
		for len(pending) > 0 {
			pending = slices.DeleteFunc(pending, func(dir string) bool {
				if count(dir) == i+1 {
					lat = append(lat, time.Since(committed))
					return true
				}
				return false
			})
			if time.Since(committed) > 10*poll {
				b.Fatalf("commit %d not on every node after %s", i, 10*poll)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
}
