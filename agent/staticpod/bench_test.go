// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/agent/workload"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/state"
)

// BenchmarkColdReconcile1000of10000 is a freshly started agent publishing
// a NodeGroup of 1,000 deployments (half with a Service) from a
// 10,000-entry index in the local store: index read, 1,500 payload reads
// and verifications, transformation, 1,000 synced renames. It runs with
// the node laid out as on a VM, the static Pod directory on disk (the
// test's temporary directory) and /run on a tmpfs (/dev/shm), and with
// the whole node root on a tmpfs; each without and with workload
// identities (a leaf issued and written into /run for every Pod).
//
//	go test ./agent/staticpod -run '^$' -bench ColdReconcile -benchtime 5x
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
	key := workloadKey(b)
	for _, fs := range []struct {
		name string
		dir  func(b *testing.B) string
	}{{"disk", diskWithTmpfsRun}, {"tmpfs", tmpfsDir}} {
		for _, identities := range []bool{false, true} {
			name := fs.name + "/plain"
			if identities {
				name = fs.name + "/identities"
			}
			b.Run(name, func(b *testing.B) {
				base := fs.dir(b)
				b.ReportAllocs()
				i := 0
				var cpu time.Duration
				for b.Loop() {
					i++
					f.root = filepath.Join(base, fmt.Sprint(i))
					if err := os.MkdirAll(f.root, 0o755); err != nil {
						b.Fatal(err)
					}
					if run := filepath.Join(base, "run"); fileExists(run) {
						// A node's /run is a tmpfs.
						tmp := filepath.Join(run, fmt.Sprint(i))
						if err := errors.Join(os.MkdirAll(tmp, 0o755), os.Symlink(tmp, filepath.Join(f.root, "run"))); err != nil {
							b.Fatal(err)
						}
					}
					var id staticpod.Identity
					if identities {
						id = newIdentities(b, f, key)
					}
					r := f.reconcilerWith(b, nil, id)
					before := cpuTime()
					res := mustReconcile(b, r)
					cpu += cpuTime() - before
					if res.Pods != 1000 || res.Written != 1000 {
						b.Fatalf("%+v", res)
					}
					b.StopTimer()
					// Every round starts from an empty root and cache.
					if err := errors.Join(os.RemoveAll(f.root), os.RemoveAll(filepath.Join(base, "run", fmt.Sprint(i)))); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				// The process's CPU time (user and system) per pass, which
				// a loaded machine does not stretch as it stretches the
				// wall-clock time.
				b.ReportMetric(float64(cpu.Milliseconds())/float64(i), "cpu-ms/op")
			})
		}
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// diskWithTmpfsRun is a directory on disk for b whose "run" entry is a
// directory on a tmpfs, where each round's /run goes.
func diskWithTmpfsRun(b *testing.B) string {
	base := b.TempDir()
	if err := os.Symlink(tmpfsDir(b), filepath.Join(base, "run")); err != nil {
		b.Fatal(err)
	}
	return base
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// tmpfsDir is a directory on a tmpfs for b, skipping b when /dev/shm is
// not one.
func tmpfsDir(b *testing.B) string {
	var st unix.Statfs_t
	if runtime.GOOS != "linux" || unix.Statfs("/dev/shm", &st) != nil || st.Type != unix.TMPFS_MAGIC {
		b.Skip("/dev/shm is not a tmpfs on this machine")
	}
	dir, err := os.MkdirTemp("/dev/shm", "podmin-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func workloadKey(b *testing.B) []byte {
	v, err := pki.GenerateWorkloadKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	k, err := pki.ParseWorkloadKey(v)
	if err != nil {
		b.Fatal(err)
	}
	return k
}

// newIdentities is a freshly started agent's workload identity manager
// over the fixture's bucket and root (the leader: it creates the CA).
func newIdentities(b *testing.B, f *fixture, key []byte) *workload.Manager {
	m, err := workload.New(workload.Options{Store: f.bucket, Cluster: "demo", Root: f.root, Key: key})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.Refresh(context.Background()); err != nil {
		b.Fatal(err)
	}
	return m
}
