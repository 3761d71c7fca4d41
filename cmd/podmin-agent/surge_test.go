// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/builtins"
)

// look is what one look at a node showed: the ready Pods its kubelet
// runs, all it runs, and whether the stored snapshot has an endpoint of
// web on it.
type look struct {
	at         time.Time
	ready, all int
	endpoint   bool
}

// watchNode looks at node n every 5 ms until stop is called.
func watchNode(f *fleet, n *fleetNode) (stop func() []look) {
	var (
		mu    sync.Mutex
		looks []look
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			ready, all := n.kube.ready()
			l := look{at: time.Now(), ready: ready, all: all, endpoint: f.snapshotHas(n.podIP("web")) || f.snapshotHas(n.podIP("web.surge"))}
			mu.Lock()
			looks = append(looks, l)
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() []look {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(looks)
	}
}

// A one-node NodeGroup rolled with maxSurge 1 starts the new revision
// beside the old Pod and stops the old one only after the new one is
// ready and the old one's endpoint left the snapshot: at every look the
// node runs a ready Pod and the snapshot has an endpoint on it, and never
// more than two Pods. The next update starts under the first name again.
func TestOneNodeSurgeNeverLeavesTheServiceWithoutAPod(t *testing.T) {
	f := newFleet(t, 1)
	n := f.start(0, readyAt(300*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := f.deploy(ctx, "hello:v1", "surge:1", builtins.UntilReady); err != nil {
		t.Fatalf("v1: %v\n%s", err, f.logs())
	}
	f.eventually(30*time.Second, "v1's endpoint in the snapshot", func() bool { return f.snapshotHas(n.podIP("web")) })
	for i, image := range []string{"hello:v2", "hello:v3"} {
		stop := watchNode(f, n)
		start := time.Now()
		r, err := f.deploy(ctx, image, "surge:1", builtins.UntilReady)
		if err != nil {
			stop()
			t.Fatalf("%s: %v\n%s", image, err, f.logs())
		}
		f.eventually(30*time.Second, "the old Pod stopped", func() bool { _, all := n.kube.ready(); return all == 1 })
		f.eventually(30*time.Second, "the new Pod's endpoint in the snapshot", func() bool {
			return f.snapshotHas(n.podIP([]string{"web.surge", "web"}[i]))
		})
		looks := stop()
		took := time.Since(start)
		for _, l := range looks {
			if l.ready == 0 || !l.endpoint || l.all > 2 {
				t.Fatalf("%s: at %s the node ran %d Pods, %d ready, endpoint in the snapshot %v\n%s", image, l.at.Sub(start), l.all, l.ready, l.endpoint, f.logs())
			}
		}
		events := f.events()
		for _, e := range events {
			if e.what == "withdrawn-late" || e.what == "replaced" && e.revision == r.Revision {
				t.Fatalf("%s: %s at %s: the old Pod stopped while the snapshot had its endpoint, or was replaced in place\n%s", image, e.what, e.at, f.logs())
			}
		}
		if !slices.ContainsFunc(events, func(e kubeletEvent) bool { return e.what == "started" && e.revision == r.Revision }) {
			t.Fatalf("%s: no Pod started beside the old one: %+v", image, events)
		}
		want := []string{"web.surge.yaml", "web.yaml"}[i]
		if _, err := os.Stat(filepath.Join(n.root, "etc", "podmin", "manifests", want)); err != nil {
			t.Fatalf("%s runs under another name than %s: %v", image, want, err)
		}
		t.Logf("%s: %d looks, a ready Pod and an endpoint at each; old Pod gone %s after the commit", image, len(looks), took.Round(time.Millisecond))
	}
}

// A surge Pod that never becomes ready keeps the old one serving: the
// node runs both, deploy --wait fails with the node's error, status names
// it, and a fixed commit replaces the broken one, again without a gap.
func TestBrokenSurgePodKeepsTheOldOneServing(t *testing.T) {
	f := newFleet(t, 1)
	n := f.start(0, readyAt(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := f.deploy(ctx, "hello:v1", "surge:1", builtins.UntilReady); err != nil {
		t.Fatalf("v1: %v\n%s", err, f.logs())
	}
	f.eventually(30*time.Second, "v1's endpoint in the snapshot", func() bool { return f.snapshotHas(n.podIP("web")) })
	n.kube.setBehaviour(func(string) podBehaviour { return podBehaviour{crash: true} })
	stop := watchNode(f, n)
	_, err := f.deploy(ctx, "hello:v2", "surge:1", builtins.UntilReady)
	if !errors.Is(err, builtins.ErrNodeError) || !strings.Contains(err.Error(), "node-0 (kubelet): container web: CrashLoopBackOff") {
		stop()
		t.Fatalf("deploy --wait of a crashing surge Pod: %v\n%s", err, f.logs())
	}
	if _, all := n.kube.ready(); all != 2 {
		t.Fatalf("the node runs %d Pods, want the old and the broken new one", all)
	}
	d := f.statusOf("web")
	if d.State != builtins.StateFailed || len(d.Nodes) != 1 || d.Nodes[0].Retiring == "" || !strings.Contains(d.Summary, "old Pod still serves beside the new one (maxSurge): node-0") {
		t.Fatalf("status: %+v", d)
	}

	n.kube.setBehaviour(readyAt(100 * time.Millisecond))
	if _, err := f.deploy(ctx, "hello:v3", "surge:1", builtins.UntilReady); err != nil {
		stop()
		t.Fatalf("v3: %v\n%s", err, f.logs())
	}
	f.eventually(30*time.Second, "one Pod left", func() bool { _, all := n.kube.ready(); return all == 1 })
	for _, l := range stop() {
		if l.ready == 0 || !l.endpoint || l.all > 2 {
			t.Fatalf("at %s the node ran %d Pods, %d ready, endpoint in the snapshot %v\n%s", l.at.Format(time.StampMilli), l.all, l.ready, l.endpoint, f.logs())
		}
	}
	for _, e := range f.events() {
		if e.what == "withdrawn-late" {
			t.Fatalf("a Pod stopped while the snapshot had its endpoint at %s\n%s", e.at, f.logs())
		}
	}
}
