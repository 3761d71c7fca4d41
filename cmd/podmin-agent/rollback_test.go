// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/objstore"
)

// A rollback commits the earlier revision's exact payload bytes again, and
// a running agent applies them: its static Pod file is byte for byte the
// one it wrote for that revision, and kubelet runs that revision ready.
func TestRollbackIsAppliedByTheNode(t *testing.T) {
	f := newFleet(t, 1)
	n := f.start(0, readyAt(50*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	podFile := filepath.Join(n.root, "etc", "podmin", "manifests", "web.yaml")

	v1, err := f.deploy(ctx, "hello:v1", "", builtins.UntilReady)
	if err != nil {
		t.Fatalf("v1: %v\n%s", err, f.logs())
	}
	v1Payload, err := f.store.Get(ctx, v1.Pod, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v1File, err := os.ReadFile(podFile)
	if err != nil {
		t.Fatal(err)
	}
	v2, err := f.deploy(ctx, "hello:v2", "", builtins.UntilReady)
	if err != nil {
		t.Fatalf("v2: %v\n%s", err, f.logs())
	}
	if v2File, _ := os.ReadFile(podFile); bytes.Equal(withoutIncarnation(v2File), withoutIncarnation(v1File)) {
		t.Fatal("the node's Pod file did not change with v2")
	}

	hist, err := f.env.History(ctx, builtins.HistoryOptions{Name: "web", NodeGroup: "workers"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Revisions) != 2 || hist.Revisions[0].PodRevision != v2.Revision || !hist.Revisions[0].Current || hist.Revisions[1].PodRevision != v1.Revision {
		t.Fatalf("history %+v: want revision 2 (v2, current) and 1 (v1)", hist.Revisions)
	}

	rb, err := f.env.Rollback(ctx, builtins.RollbackOptions{Name: "web", NodeGroup: "workers", Wait: builtins.UntilReady})
	if err != nil {
		t.Fatalf("rollback: %v\n%s", err, f.logs())
	}
	if rb.From != 2 || rb.To != 1 || rb.Revision != v1.Revision || rb.Pod != v1.Pod || rb.ServicePath != v1.ServicePath {
		t.Fatalf("rollback %+v: want from 2 to 1 with v1's payloads %s", rb, v1.Pod)
	}
	if rb.Wait == nil || rb.Wait.Ready != 1 {
		t.Fatalf("rollback wait %+v: want the node ready", rb.Wait)
	}
	got, err := f.store.Get(ctx, rb.Pod, objstore.GetOptions{})
	if err != nil || !bytes.Equal(got.Data, v1Payload.Data) {
		t.Fatalf("the rolled-back Pod payload differs from v1's (%v)", err)
	}
	// Each Pod the node starts is a new incarnation; everything else is
	// v1's.
	f.eventually(time.Minute, "the node's Pod file to be v1's again", func() bool {
		b, _ := os.ReadFile(podFile)
		return bytes.Equal(withoutIncarnation(b), withoutIncarnation(v1File))
	})
	hist, err = f.env.History(ctx, builtins.HistoryOptions{Name: "web", NodeGroup: "workers"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Revisions) != 3 || hist.Revisions[0].Revision != 3 || !hist.Revisions[0].Current || hist.Revisions[0].PodRevision != v1.Revision || hist.Revisions[2].Current {
		t.Fatalf("history after the rollback %+v: want revision 3 (v1's payloads) alone current", hist.Revisions)
	}
	if s := f.statusOf("web"); s.Revision != v1.Revision || s.State != builtins.StateReady {
		t.Fatalf("status after the rollback: %+v: want revision %s ready", s, v1.Revision)
	}
}

// withoutIncarnation drops the podmin.dev/incarnation annotation, which
// differs for every Pod a node starts.
func withoutIncarnation(podFile []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(podFile, []byte("\n")) {
		if !bytes.Contains(l, []byte("podmin.dev/incarnation:")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}
