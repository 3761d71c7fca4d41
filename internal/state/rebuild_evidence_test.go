// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// evidenceFixture is a bucket after web was deployed in two versions, api
// once, and db (one payload) was deployed and deleted again: every write
// through a fake clock, one second apart.
type evidenceFixture struct {
	store          *fakeClockStore
	web1, web2, db state.Entry
	api            state.Entry
}

func newEvidenceFixture(t *testing.T) evidenceFixture {
	t.Helper()
	ctx := context.Background()
	f := evidenceFixture{store: newFakeClockStore(newLocal(t))}
	c := committer(f.store, 4)
	deploy := func(d state.Deployment) state.Entry {
		t.Helper()
		res, err := c.Deploy(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		return res.Entry
	}
	f.web1 = deploy(deployment("workers", "web", "product", "example/web:v1", ""))
	f.web2 = deploy(deployment("workers", "web", "product", "example/web:v2", ""))
	f.api = deploy(deployment("workers", "api", "product", "example/api:v1", ""))
	f.db = deploy(deployment("edge", "db", "default", "example/db:v1", ""))
	if _, err := c.Delete(ctx, state.Key{NodeGroup: "edge", Name: "db"}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f evidenceFixture) loseIndex(t *testing.T) {
	t.Helper()
	if err := f.store.Delete(context.Background(), state.IndexPath, ""); err != nil {
		t.Fatal(err)
	}
}

// ambiguities returns the subjects of an *AmbiguousError, or its text.
func ambiguities(err error) string {
	var amb *state.AmbiguousError
	if !errors.As(err, &amb) {
		return fmt.Sprint(err)
	}
	var out []string
	for _, a := range amb.Ambiguities {
		out = append(out, a.Subject)
	}
	return strings.Join(out, " ")
}

func droppedReason(plan *state.RebuildPlan, deployment string) string {
	for _, d := range plan.Dropped {
		if d.Deployment == deployment {
			return d.Reason
		}
	}
	return ""
}

// A lost index is rebuilt without resurrecting a deployment that was
// deleted: the view of its NodeGroup, written after its only payload,
// does not list it. What the views list comes back, the version each
// names included, without a pick.
func TestRebuildLeavesOutWhatTheNewerViewLacks(t *testing.T) {
	ctx := context.Background()
	for _, lose := range []string{"missing", "corrupt"} {
		t.Run(lose, func(t *testing.T) {
			f := newEvidenceFixture(t)
			if lose == "missing" {
				f.loseIndex(t)
			} else if _, err := f.store.Put(ctx, state.IndexPath, []byte(`{"workers/web": {"pod": 17}`)); err != nil {
				t.Fatal(err)
			}
			plan, err := state.PlanRebuild(ctx, f.store, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"workers/web": state.FromView, "workers/api": state.FromView}
			if got := sources(plan); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("sources %v, want %v", got, want)
			}
			if e, _ := plan.Index.Lookup(state.Key{NodeGroup: "workers", Name: "web"}); e != f.web2 {
				t.Errorf("web rebuilt as %+v, want the version its view names %+v", e, f.web2)
			}
			if r := droppedReason(plan, "edge/db"); !strings.Contains(r, "deleted: the NodeGroup view deployments/nodegroups/edge.json") || !strings.Contains(r, "does not list it") {
				t.Errorf("edge/db left out for %q; dropped %+v", r, plan.Dropped)
			}
			if err := committer(f.store, 4).WriteRebuild(ctx, plan); err != nil {
				t.Fatal(err)
			}
			ix := readIndex(t, f.store)
			if _, ok := ix.Lookup(state.Key{NodeGroup: "edge", Name: "db"}); ok || ix.Len() != 2 {
				t.Fatalf("rebuilt index resurrects db or misses an entry:\n%s", ix.Encode())
			}
		})
	}
}

// What the views cannot decide is listed for a pick, never added: a Pod
// payload written after the view that lacks it (a deploy whose index write
// never happened, or whose view was not written yet), one written in the
// same second as the view, and a payload of a NodeGroup without a view.
func TestRebuildListsWhatTheViewsCannotDecide(t *testing.T) {
	ctx := context.Background()
	t.Run("payload newer than the view", func(t *testing.T) {
		f := newEvidenceFixture(t)
		orphan := deployment("workers", "cron", "default", "example/cron:v1", "")
		if _, err := f.store.PutIfAbsent(ctx, mustPodPath(t, orphan), orphan.Pod); err != nil {
			t.Fatal(err)
		}
		f.loseIndex(t)
		_, err := state.PlanRebuild(ctx, f.store, nil, nil)
		if got := ambiguities(err); got != "workers/cron" {
			t.Fatalf("ambiguities %q, want workers/cron", got)
		}
		checkErr(t, "orphan", err, "written at or after it")
		checkErr(t, "orphan", err, "--pick workers/cron="+digestOf(t, mustPodPath(t, orphan))[:16])
		checkErr(t, "orphan", err, "--pick workers/cron=none")
		plan, err := state.PlanRebuild(ctx, f.store, nil, picks(t, "workers/cron=none"))
		if err != nil || plan.Index.Len() != 2 {
			t.Fatalf("cron left out: %v", err)
		}
	})
	t.Run("payload as old as the view", func(t *testing.T) {
		f := newEvidenceFixture(t)
		view, _ := state.ViewPath("edge")
		f.store.setTime(view, f.db.Pod)
		f.loseIndex(t)
		_, err := state.PlanRebuild(ctx, f.store, nil, nil)
		if got := ambiguities(err); got != "edge/db" {
			t.Fatalf("ambiguities %q, want edge/db", got)
		}
	})
	t.Run("no view", func(t *testing.T) {
		f := newEvidenceFixture(t)
		view, _ := state.ViewPath("edge")
		if err := f.store.Delete(ctx, view, ""); err != nil {
			t.Fatal(err)
		}
		f.loseIndex(t)
		_, err := state.PlanRebuild(ctx, f.store, nil, nil)
		if got := ambiguities(err); got != "edge/db" {
			t.Fatalf("ambiguities %q, want edge/db", got)
		}
		checkErr(t, "no view", err, "no NodeGroup view")
		plan, err := state.PlanRebuild(ctx, f.store, nil, picks(t, "edge/db="+digestOf(t, f.db.Pod)[:12]))
		if err != nil {
			t.Fatal(err)
		}
		if got := sources(plan)["edge/db"]; got != state.FromPick {
			t.Fatalf("edge/db from %q after the pick", got)
		}
	})
	t.Run("view without the write ID it was made from", func(t *testing.T) {
		f := newEvidenceFixture(t)
		view, _ := state.ViewPath("edge")
		if _, err := f.store.Put(ctx, view, []byte("{}\n")); err != nil { // by hand
			t.Fatal(err)
		}
		f.loseIndex(t)
		_, err := state.PlanRebuild(ctx, f.store, nil, nil)
		if got := ambiguities(err); got != "edge/db" {
			t.Fatalf("ambiguities %q, want edge/db", got)
		}
	})
}

// The metadata of a damaged index, when the damage left it (the body
// rewritten in place), tells a current view from a stale one, whatever
// the times: a view whose bytes have the digest the index records for its
// NodeGroup is exactly its entries, and one with another digest is not
// evidence at all, however late it was written.
func TestRebuildTrustsViewsByTheIndexMetadata(t *testing.T) {
	ctx := context.Background()
	damage := func(t *testing.T, f evidenceFixture) {
		t.Helper()
		info, err := f.store.Head(ctx, state.IndexPath)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := objstore.PutWithOptions(ctx, f.store, state.IndexPath, []byte("{\x00"), objstore.PutOptions{Metadata: info.Metadata}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("current view written in the payload's second", func(t *testing.T) {
		f := newEvidenceFixture(t)
		view, _ := state.ViewPath("edge")
		f.store.setTime(view, f.db.Pod)
		damage(t, f)
		plan, err := state.PlanRebuild(ctx, f.store, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r := droppedReason(plan, "edge/db"); !strings.Contains(r, "which the index metadata proves current") {
			t.Fatalf("edge/db left out for %q", r)
		}
	})
	t.Run("stale view written late", func(t *testing.T) {
		f := newEvidenceFixture(t)
		// A slower committer's view of the version that still held db
		// lands after the delete's view.
		view, _ := state.ViewPath("edge")
		old := fmt.Appendf(nil, "{\n  \"edge/db\": {\n    \"pod\": %q\n  }\n}\n", f.db.Pod)
		obj, err := f.store.Get(ctx, view, objstore.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := objstore.PutWithOptions(ctx, f.store, view, old, objstore.PutOptions{Metadata: map[string]string{state.ViewSourceMeta: strings.Repeat("ab", 8)}}); err != nil {
			t.Fatal(err)
		}
		damage(t, f)
		_, err = state.PlanRebuild(ctx, f.store, nil, nil)
		if got := ambiguities(err); got != "edge/db" {
			t.Fatalf("ambiguities %q, want edge/db (the stale view %s is no evidence; it was %q)", got, view, obj.Data)
		}
		checkErr(t, "stale view", err, "no NodeGroup view")
	})
}

// The defect as an operator met it: a deleted deployment that had one
// payload came back with a rebuild of the lost index, and its Pod ran
// again, although the NodeGroup views listed exactly the live entries.
func TestRebuildDoesNotResurrectADeletedDeployment(t *testing.T) {
	ctx := context.Background()
	store := newFakeClockStore(newLocal(t))
	c := committer(store, 4)
	for _, d := range []state.Deployment{
		deployment("workers", "web", "default", "example/web:v1", ""),
		deployment("workers", "old", "default", "example/old:v1", ""),
	} {
		if _, err := c.Deploy(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Delete(ctx, state.Key{NodeGroup: "workers", Name: "old"}); err != nil {
		t.Fatal(err)
	}
	if err := store.Delete(ctx, state.IndexPath, ""); err != nil {
		t.Fatal(err)
	}
	plan, err := state.PlanRebuild(ctx, store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteRebuild(ctx, plan); err != nil {
		t.Fatal(err)
	}
	ix := readIndex(t, store)
	if _, ok := ix.Lookup(state.Key{NodeGroup: "workers", Name: "old"}); ok || ix.Len() != 1 {
		t.Fatalf("the rebuilt index is not the live one:\n%s", ix.Encode())
	}
}
