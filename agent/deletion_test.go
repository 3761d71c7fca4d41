// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/objstore/s3store/s3storetest"
	"podmin.dev/podmin/internal/state"
)

// deletionNode is a node's reconcile loop with its readiness served, as
// Run assembles them, on any bucket.
type deletionNode struct {
	rec       *staticpod.Reconciler
	hs        *health.Server
	manifests string
}

func startDeletionNode(t *testing.T, b objstore.Bucket) *deletionNode {
	t.Helper()
	root := t.TempDir()
	rec, err := staticpod.New(staticpod.Options{Store: b, Cluster: "demo", NodeGroup: "workers", Root: root, BucketExists: b.BucketExists})
	if err != nil {
		t.Fatal(err)
	}
	hl := health.NewHealth(staticpod.Component)
	loop := staticpod.NewLoop(rec, staticpod.LoopOptions{Interval: 20 * time.Millisecond, MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 40 * time.Millisecond, Health: hl})
	n := &deletionNode{rec: rec, hs: &health.Server{Addr: "127.0.0.1:0", Health: hl}, manifests: rec.ManifestsDir()}
	if err := n.hs.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = n.hs.Stop(context.Background())
	})
	return n
}

func (n *deletionNode) readyz(t *testing.T) (int, string) {
	return (&localAgent{health: n.hs.Bound()}).get(t, "/readyz")
}

// files returns every file of the static Pod directory with its content.
func (n *deletionNode) files(t *testing.T) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(n.manifests)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(n.manifests, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// passes waits until two more passes completed, so the state after a
// deletion step was seen.
func (n *deletionNode) passes(t *testing.T) {
	t.Helper()
	from := n.rec.Counters().Passes
	waitFor(t, 20*time.Second, "two more passes", func() bool { return n.rec.Counters().Passes >= from+2 })
}

// deletionBackend is a bucket and the directory its server keeps it in.
type deletionBackend struct {
	name string
	open func(t *testing.T) (objstore.Bucket, string, func(context.Context) error)
}

var deletionBackends = []deletionBackend{
	{"local", func(t *testing.T) (objstore.Bucket, string, func(context.Context) error) {
		b := localstore.Open(filepath.Join(t.TempDir(), "bucket"))
		if err := b.CreateBucket(context.Background()); err != nil {
			t.Fatal(err)
		}
		return b, b.Dir(), b.DeleteBucket
	}},
	{"versitygw", func(t *testing.T) (objstore.Bucket, string, func(context.Context) error) {
		if testing.Short() {
			t.Skip("starts an S3 server")
		}
		srv := objstoretest.StartVersityGW(t)
		b := s3storetest.NewBucket(t, srv)
		// versitygw's posix backend keeps a bucket as a directory.
		return b, filepath.Join(srv.Dir, b.Name()), b.DeleteBucket
	}},
}

// Deleting the bucket the ordinary ways never empties a node: emptying it
// key by key (the index first, then the other objects, then the bucket,
// as aws s3 rb --force does) and renaming its directory away both leave
// every static Pod file exactly as it was, and /readyz answers 503 with
// the true reason at every step.
func TestBucketDeletionKeepsEveryFile(t *testing.T) {
	for _, be := range deletionBackends {
		for _, order := range []string{"index-objects-bucket", "rename"} {
			t.Run(be.name+"/"+order, func(t *testing.T) {
				ctx := context.Background()
				b, dir, deleteBucket := be.open(t)
				for _, name := range []string{"web", "api", "db"} {
					commit(t, b, name, name+":v1", name != "db")
				}
				n := startDeletionNode(t, b)
				waitFor(t, 20*time.Second, "ready with three Pods", func() bool {
					code, _ := n.readyz(t)
					return code == 200 && len(n.files(t)) == 3
				})
				good := n.files(t)
				step := func(what, reason string) {
					t.Helper()
					n.passes(t)
					if got := n.files(t); !maps.Equal(got, good) {
						t.Fatalf("after %s the static Pod files changed: %d files, want the 3 published", what, len(got))
					}
					code, body := n.readyz(t)
					if code != 503 || !strings.Contains(body, reason) || !strings.Contains(body, "keeping every published Pod and Service") {
						t.Fatalf("after %s /readyz = %d %q, want 503 naming %q", what, code, body, reason)
					}
				}
				switch order {
				case "rename":
					if err := os.Rename(dir, dir+".away"); err != nil {
						t.Fatal(err)
					}
					step("renaming the bucket away", "the cluster bucket does not exist")
				default:
					if err := b.Delete(ctx, state.IndexPath, ""); err != nil {
						t.Fatal(err)
					}
					step("deleting the index", "the deployment index is absent")
					all, err := objstore.ListAll(ctx, b, "")
					if err != nil {
						t.Fatal(err)
					}
					for _, o := range all {
						if err := b.Delete(ctx, o.Key, ""); err != nil {
							t.Fatal(err)
						}
					}
					step("deleting every object", "the deployment index is absent")
					if err := deleteBucket(ctx); err != nil {
						t.Fatal(err)
					}
					step("deleting the bucket", "the cluster bucket does not exist")
				}
			})
		}
	}
}
