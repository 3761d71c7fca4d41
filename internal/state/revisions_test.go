// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// revisionCommitter has a fixed clock and numbered write IDs.
func revisionCommitter(s objstore.Store) *state.Committer {
	n := 0
	return state.NewCommitter(s, state.CommitOptions{Sleep: noSleep,
		Now: func() time.Time { return time.Date(2026, 12, 7, 16, 0, n, 0, time.UTC) },
		NewWriteID: func() string {
			n++
			return fmt.Sprintf("%016x", n)
		}})
}

func TestDeployRecordsBoundedRevisions(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	c := revisionCommitter(b)
	for i := 1; i <= state.MaxRevisions+3; i++ {
		if _, err := c.Deploy(ctx, deployment("workers", "web", "default", fmt.Sprintf("hello:v%d", i), "")); err != nil {
			t.Fatal(err)
		}
		// An identical deploy is no new revision.
		if r, err := c.Deploy(ctx, deployment("workers", "web", "default", fmt.Sprintf("hello:v%d", i), "")); err != nil || r.Outcome != state.Unchanged {
			t.Fatalf("identical deploy: %+v, %v", r, err)
		}
	}
	ix, _, err := state.ReadIndex(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	k := state.Key{NodeGroup: "workers", Name: "web"}
	revs := ix.Revisions(k)
	if len(revs) != state.MaxRevisions {
		t.Fatalf("%d revisions recorded, want the bound %d", len(revs), state.MaxRevisions)
	}
	newest := state.MaxRevisions + 3
	cur, _ := ix.Lookup(k)
	if revs[0].Number != newest || revs[0].Entry() != cur || revs[0].Images[0] != fmt.Sprintf("hello:v%d", newest) {
		t.Errorf("newest revision %+v, want number %d with the current entry %+v", revs[0], newest, cur)
	}
	if revs[0].Write != fmt.Sprintf("%016x", newest) || revs[0].Time != "2026-12-07T16:00:13Z" {
		t.Errorf("newest revision's write %q at %q, want the write ID of its commit and its time", revs[0].Write, revs[0].Time)
	}
	if last := revs[len(revs)-1]; last.Number != 4 {
		t.Errorf("oldest kept revision is %d, want 4", last.Number)
	}
	// The index a node reads still decodes, canonically and generally.
	raw, err := b.Get(ctx, state.IndexPath, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := state.DecodeIndex(raw.Data)
	if err != nil || !bytes.Equal(again.Encode(), raw.Data) {
		t.Fatalf("the written index does not decode to itself: %v", err)
	}
	spaced := bytes.ReplaceAll(raw.Data, []byte("\n"), []byte("\n "))
	if loose, err := state.DecodeIndex(spaced); err != nil || !bytes.Equal(loose.Encode(), raw.Data) {
		t.Fatalf("the general decoder reads the revisions differently: %v", err)
	}
}

func TestIndexWithoutRevisionsStillLoads(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	old := deployment("workers", "web", "default", "hello:v1", "")
	pod, _ := state.PodPayloadPath("workers", old.Pod)
	if _, err := b.PutIfAbsent(ctx, pod, old.Pod); err != nil {
		t.Fatal(err)
	}
	legacy := fmt.Sprintf("{\n  \"workers/web\": {\n    \"pod\": %q\n  }\n}\n", pod)
	if _, err := b.PutIfAbsent(ctx, state.IndexPath, []byte(legacy)); err != nil {
		t.Fatal(err)
	}
	c := revisionCommitter(b)
	k := old.Key
	if _, err := c.Rollback(ctx, k, 0); !errors.Is(err, state.ErrNoRevision) || !strings.Contains(err.Error(), "records no revisions") {
		t.Fatalf("rollback of an entry without revisions: %v", err)
	}
	if _, err := c.Deploy(ctx, deployment("workers", "web", "default", "hello:v2", "")); err != nil {
		t.Fatal(err)
	}
	ix, _, err := state.ReadIndex(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	revs := ix.Revisions(k)
	if len(revs) != 2 || revs[1].Number != 1 || revs[1].Pod != pod || revs[1].Time != "" || revs[1].Write != "" || revs[0].Number != 2 {
		t.Fatalf("revisions after the first recorded deploy: %+v: want 2 (new) and 1 (the legacy entry, time and write unknown)", revs)
	}
}

func TestRollbackRestoresEarlierPayloadBytes(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	c := revisionCommitter(b)
	v1 := deployment("workers", "web", "shop", "hello:v1", "front")
	v2 := deployment("workers", "web", "shop", "hello:v2", "")
	for _, d := range []state.Deployment{v1, v2} {
		if _, err := c.Deploy(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	r, err := c.Rollback(ctx, v1.Key, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.From.Number != 2 || r.To.Number != 1 || r.Outcome != state.Updated {
		t.Fatalf("rollback %+v, want from 2 to 1, updated", r)
	}
	ix, _, err := state.ReadIndex(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := ix.Lookup(v1.Key)
	for path, want := range map[string][]byte{e.Pod: v1.Pod, e.Service: v1.Service} {
		obj, err := b.Get(ctx, path, objstore.GetOptions{})
		if err != nil || !bytes.Equal(obj.Data, want) {
			t.Errorf("after the rollback %s holds %q (%v), want revision 1's bytes", path, obj.Data, err)
		}
	}
	if revs := ix.Revisions(v1.Key); len(revs) != 3 || revs[0].Number != 3 || revs[0].Entry() != revs[2].Entry() {
		t.Errorf("revisions after the rollback: %+v: want a new revision 3 with revision 1's payloads", revs)
	}
	if _, err := c.Rollback(ctx, v1.Key, 7); !errors.Is(err, state.ErrNoRevision) || !strings.Contains(err.Error(), "records revisions 3, 2, 1") {
		t.Errorf("rollback to an unknown revision: %v", err)
	}
	// A corrupt payload of the target fails before anything is written.
	if _, err := b.Put(ctx, r.From.Pod, []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	before, _ := b.Get(ctx, state.IndexPath, objstore.GetOptions{})
	if _, err := c.Rollback(ctx, v1.Key, 2); !errors.Is(err, state.ErrCorruptPayload) {
		t.Errorf("rollback to a corrupt payload: %v", err)
	}
	after, _ := b.Get(ctx, state.IndexPath, objstore.GetOptions{})
	if !bytes.Equal(before.Data, after.Data) {
		t.Error("a failed rollback changed the index")
	}
}

func TestRevisionRules(t *testing.T) {
	pod := "nodegroups/workers/pods/sha512/" + strings.Repeat("a", 128) + ".yaml"
	entry := func(revs string) []byte {
		return fmt.Appendf(nil, `{"workers/web": {"pod": %q, "revisions": %s}}`, pod, revs)
	}
	for _, tc := range []struct{ name, revs, want string }{
		{"empty list", `[]`, `must list 1 to 10 revisions`},
		{"ascending", fmt.Sprintf(`[{"revision":1,"pod":%q},{"revision":2,"pod":%q}]`, pod, pod), `strictly descending`},
		{"zero", fmt.Sprintf(`[{"revision":0,"pod":%q}]`, pod), `must be positive`},
		{"other nodegroup", `[{"revision":1,"pod":"nodegroups/x/pods/sha512/` + strings.Repeat("a", 128) + `.yaml"}]`, `belongs to NodeGroup "x"`},
		{"bad time", fmt.Sprintf(`[{"revision":1,"pod":%q,"time":"yesterday"}]`, pod), `not an RFC 3339 UTC time`},
		{"bad write", fmt.Sprintf(`[{"revision":1,"pod":%q,"write":"xyz"}]`, pod), `is not a write ID`},
		{"unknown field", fmt.Sprintf(`[{"revision":1,"pod":%q,"digest":"x"}]`, pod), `unknown field "digest"`},
		{"empty image", fmt.Sprintf(`[{"revision":1,"pod":%q,"images":[""]}]`, pod), `an image reference must be`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := state.DecodeIndex(entry(tc.revs)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	ok := fmt.Sprintf(`[{"revision":2,"pod":%q,"images":["a:1"],"time":"2026-12-07T16:00:00Z","write":"0123456789abcdef"},{"revision":1,"pod":%q}]`, pod, pod)
	if _, err := state.DecodeIndex(entry(ok)); err != nil {
		t.Errorf("a valid revision list: %v", err)
	}
}

// A rebuild salvages a readable entry that records revisions (an object
// nested in the entry) and keeps its revisions.
func TestRebuildKeepsTheRevisionsOfASalvagedEntry(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	c := revisionCommitter(b)
	for _, img := range []string{"hello:v1", "hello:v2"} {
		if _, err := c.Deploy(ctx, deployment("workers", "web", "default", img, "front")); err != nil {
			t.Fatal(err)
		}
	}
	valid, err := b.Get(ctx, state.IndexPath, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := state.DecodeIndex(valid.Data)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := bytes.Replace(valid.Data, []byte("\n}\n"), []byte(",\n  \"workers/broken\": {\"pod\": 17}\n<<<< truncated"), 1)
	if _, err := b.Put(ctx, state.IndexPath, corrupt); err != nil {
		t.Fatal(err)
	}
	plan, err := state.PlanRebuild(ctx, b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := state.Key{NodeGroup: "workers", Name: "web"}
	if len(plan.Entries) != 1 || plan.Entries[0].Source != state.FromIndex {
		t.Fatalf("plan %+v: want web kept as a readable entry", plan.Entries)
	}
	if !bytes.Equal(plan.Index.Encode(), want.Encode()) || len(plan.Index.Revisions(k)) != 2 {
		t.Fatalf("rebuilt\n%s\nwant\n%s", plan.Index.Encode(), want.Encode())
	}
}

// An entry too damaged to read is restored as its NodeGroup's view lists
// it, with the revisions the view records.
func TestRebuildTakesTheRevisionsOfTheView(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	c := revisionCommitter(b)
	for _, img := range []string{"hello:v1", "hello:v2"} {
		if _, err := c.Deploy(ctx, deployment("workers", "web", "default", img, "")); err != nil {
			t.Fatal(err)
		}
	}
	valid, err := b.Get(ctx, state.IndexPath, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := state.DecodeIndex(valid.Data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, state.IndexPath, []byte("{\n  \"workers/web\": {\"pod\": 17}\n<<<< truncated")); err != nil {
		t.Fatal(err)
	}
	plan, err := state.PlanRebuild(ctx, b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Entries) != 1 || plan.Entries[0].Source != state.FromView {
		t.Fatalf("plan %+v: want web restored from its view", plan.Entries)
	}
	if !bytes.Equal(plan.Index.Encode(), want.Encode()) {
		t.Fatalf("rebuilt\n%s\nwant\n%s", plan.Index.Encode(), want.Encode())
	}
}

// A rollback in a bucket whose index was lost is refused as a lost index,
// never answered with "no such deployment".
func TestRollbackRefusesALostIndex(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	c := revisionCommitter(b)
	if _, err := c.Deploy(ctx, deployment("workers", "web", "default", "hello:v1", "")); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, state.IndexPath, ""); err != nil {
		t.Fatal(err)
	}
	_, err := c.Rollback(ctx, state.Key{NodeGroup: "workers", Name: "web"}, 0)
	if !errors.Is(err, state.ErrIndexMissing) || errors.Is(err, state.ErrNoRevision) {
		t.Fatalf("rollback with a lost index: %v", err)
	}
}
