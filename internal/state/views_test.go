// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/state"
)

// headVersion reads the index's write metadata and its content.
func headVersion(t *testing.T, store objstore.Store) (state.IndexMeta, *state.Index) {
	t.Helper()
	obj, err := store.Get(context.Background(), state.IndexPath, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := objstore.ValidateMetadata(obj.Metadata); err != nil {
		t.Fatalf("index metadata: %v", err)
	}
	ix, err := state.DecodeIndex(obj.Data)
	if err != nil {
		t.Fatal(err)
	}
	return state.ParseIndexMeta(obj.Metadata), ix
}

// Every proof the index metadata gives is checked against a model of the
// content each write left, over random deploys and deletes across more
// NodeGroups than the metadata can list; and the proofs are useful: a
// NodeGroup the last write did not touch is proven unchanged, and the
// touched one's view digest is recorded and matches its view object.
func TestNodeGroupProofsFollowTheModel(t *testing.T) {
	ctx := context.Background()
	store := newLocal(t)
	c := committer(store, 4)
	r := rand.New(rand.NewPCG(11, 12))
	var ngs []string
	for i := range 20 {
		ngs = append(ngs, fmt.Sprintf("ng%d", i))
	}
	ngs = append(ngs, "ng1-a") // orders between "ng1/" and "ng10/"
	// views[writeID][ng] is the NodeGroup's view in that version.
	views := map[string]map[string]string{}
	listedMax := 0
	for op := range 150 {
		// Most writes go to a few NodeGroups, as deploys do.
		ng := ngs[min(len(ngs)-1, int(r.ExpFloat64()*3))]
		name := fmt.Sprintf("app%d", r.IntN(4))
		wrote := true
		if r.IntN(4) == 0 {
			res, err := c.Delete(ctx, state.Key{NodeGroup: ng, Name: name})
			if err != nil {
				t.Fatal(err)
			}
			wrote = res.Outcome == state.Deleted
		} else {
			svc := ""
			if r.IntN(2) == 0 {
				svc = ng + "-" + name
			}
			if _, err := c.Deploy(ctx, deployment(ng, name, "default", fmt.Sprintf("img:v%d", op), svc)); err != nil {
				t.Fatal(err)
			}
		}
		if !wrote {
			continue
		}
		meta, ix := headVersion(t, store)
		id := meta.WriteID()
		if id == "" {
			t.Fatal("no write ID")
		}
		if views[id] == nil {
			views[id] = map[string]string{}
			for _, g := range ngs {
				views[id][g] = string(ix.NodeGroupView(g))
			}
		}
		listed := 0
		for _, g := range ngs {
			cur := views[id][g]
			for j, since := range meta.Chain {
				p := meta.NodeGroup(g, since)
				if p.Unchanged && views[since] != nil && views[since][g] != cur {
					t.Fatalf("op %d: %s proven unchanged since %s (position %d), but its view changed", op, g, since, j)
				}
				if p.Digest != "" && p.Digest != state.ViewDigest(g, []byte(cur)) {
					t.Fatalf("op %d: %s: recorded digest %s is not its view's", op, g, p.Digest)
				}
			}
			if p := meta.NodeGroup(g, ""); p.Digest != "" {
				listed++
			}
			if len(meta.Chain) > 1 && g != ng && !meta.NodeGroup(g, meta.Chain[1]).Unchanged {
				t.Fatalf("op %d: %s, untouched by the last write to %s, is not proven unchanged", op, g, ng)
			}
		}
		listedMax = max(listedMax, listed)
		if p := meta.NodeGroup(ng, ""); p.Digest == "" {
			t.Fatalf("op %d: the NodeGroup %s just written has no recorded digest", op, ng)
		} else if items, err := state.ReadView(ctx, store, ng, p.Digest, 1<<20); err != nil {
			t.Fatalf("op %d: the view of %s: %v", op, ng, err)
		} else if want := ix.NodeGroup(ng); fmt.Sprint(items) != fmt.Sprint(want) {
			t.Fatalf("op %d: view %v, index %v", op, items, want)
		}
	}
	if len(views) < 110 {
		t.Fatalf("only %d distinct versions", len(views))
	}
	if listedMax < 8 {
		t.Fatalf("at most %d NodeGroups listed: the metadata should hold every NodeGroup the last 23 writes changed (8 or more here)", listedMax)
	}
	t.Logf("%d versions; up to %d NodeGroups listed", len(views), listedMax)
}

// A view is used only when its bytes have the digest the index records:
// a stale, corrupt, missing or foreign view is ErrViewStale.
func TestReadViewRefusesWhatTheIndexDoesNotVouchFor(t *testing.T) {
	ctx := context.Background()
	store := newLocal(t)
	c := committer(store, 4)
	view, _ := state.ViewPath("workers")
	var older []byte
	for _, d := range []state.Deployment{
		deployment("workers", "web", "default", "web:v1", "web"),
		deployment("workers", "api", "default", "api:v1", ""),
		deployment("edge", "proxy", "default", "proxy:v1", ""),
	} {
		if _, err := c.Deploy(ctx, d); err != nil {
			t.Fatal(err)
		}
		if older == nil {
			obj, err := store.Get(ctx, view, objstore.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			older = obj.Data
		}
	}
	meta, ix := headVersion(t, store)
	digest := meta.NodeGroup("workers", "").Digest
	items, err := state.ReadView(ctx, store, "workers", digest, 1<<20)
	if err != nil || len(items) != 2 || fmt.Sprint(items) != fmt.Sprint(ix.NodeGroup("workers")) {
		t.Fatalf("view = %v, %v", items, err)
	}
	good, err := store.Get(ctx, view, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	edge, _ := state.ViewPath("edge")
	foreign, err := store.Get(ctx, edge, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	web, _ := ix.Lookup(state.Key{NodeGroup: "workers", Name: "web"})
	api, _ := ix.Lookup(state.Key{NodeGroup: "workers", Name: "api"})
	for name, data := range map[string]string{
		// A hand edit that is still a valid view of the NodeGroup.
		"edited":    strings.Replace(string(good.Data), web.Pod, api.Pod, 1),
		"truncated": string(good.Data[:len(good.Data)/2]),
		"empty":     "{}\n",
		"foreign":   string(foreign.Data),
		"older":     string(older),
	} {
		if _, err := store.Put(ctx, view, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if _, err := state.ReadView(ctx, store, "workers", digest, 1<<20); !errors.Is(err, state.ErrViewStale) {
			t.Errorf("%s view: %v, want ErrViewStale", name, err)
		}
	}
	if err := store.Delete(ctx, view, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := state.ReadView(ctx, store, "workers", digest, 1<<20); !errors.Is(err, state.ErrViewStale) {
		t.Errorf("missing view: %v, want ErrViewStale", err)
	}
	if _, err := store.Put(ctx, view, good.Data); err != nil {
		t.Fatal(err)
	}
	if _, err := state.ReadView(ctx, store, "workers", digest, 10); !errors.Is(err, state.ErrViewStale) {
		t.Errorf("oversized view: %v, want ErrViewStale", err)
	}
	// A view of another NodeGroup is never taken for this one, even when
	// both are empty.
	if state.ViewDigest("a", []byte("{}\n")) == state.ViewDigest("b", []byte("{}\n")) {
		t.Error("empty views of two NodeGroups have one digest")
	}
}

// The keeper rewrites a view the committer did not write, a view edited by
// hand and a stale one; a NodeGroup that left the index gets an empty
// view; a view found right is not read again until a full check, which
// reads it conditionally.
func TestViewKeeperRepairsViews(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	fs := faultstore.New(b)
	// The committer stops before each view write.
	fs.SetRules(faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpPut}, Prefix: state.ViewsPrefix})
	c := committer(fs, 4)
	for _, d := range []state.Deployment{
		deployment("workers", "web", "default", "web:v1", "web"),
		deployment("edge", "proxy", "default", "proxy:v1", ""),
		deployment("batch", "job", "default", "job:v1", ""),
	} {
		if _, err := c.Deploy(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	fs.SetRules()
	viewOf := func(ng string) string {
		p, _ := state.ViewPath(ng)
		obj, err := b.Get(ctx, p, objstore.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return string(obj.Data)
	}
	if v := viewOf("workers"); !strings.Contains(v, "not found") {
		t.Fatalf("the committer wrote a view: %s", v)
	}
	k := state.NewViewKeeper(fs)
	sync := func(full bool) (state.ViewSync, *state.Index) {
		t.Helper()
		meta, ix := headVersion(t, b)
		res, err := k.Sync(ctx, ix, meta.WriteID(), full)
		if err != nil {
			t.Fatal(err)
		}
		for _, ng := range []string{"workers", "edge", "batch"} {
			if got, want := viewOf(ng), string(ix.NodeGroupView(ng)); got != want {
				t.Fatalf("view of %s:\n%s\nwant:\n%s", ng, got, want)
			}
			if p := meta.NodeGroup(ng, ""); p.Digest != "" {
				if _, err := state.ReadView(ctx, b, ng, p.Digest, 1<<20); err != nil {
					t.Fatalf("the repaired view of %s is not vouched for: %v", ng, err)
				}
			}
		}
		return res, ix
	}
	if res, _ := sync(false); res.Rewritten != 3 {
		t.Fatalf("first sync %+v, want 3 views written", res)
	}
	fs.ResetCounts()
	if res, _ := sync(false); res.Checked != 0 || fs.Counts().Total() != 0 {
		t.Fatalf("second sync %+v, %+v: nothing should be read", res, fs.Counts())
	}
	// A hand edit, then a full check: every view read conditionally, the
	// edited one rewritten.
	p, _ := state.ViewPath("edge")
	if _, err := b.Put(ctx, p, []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	fs.ResetCounts()
	if res, _ := sync(true); res.Checked != 3 || res.Rewritten != 1 || fs.Counts().Get != 3 {
		t.Fatalf("full sync %+v, %+v", res, fs.Counts())
	}
	// A stale view after a commit whose view write was lost; a
	// NodeGroup emptied by a delete.
	fs.SetRules(faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpPut}, Prefix: state.ViewsPrefix})
	if _, err := c.Deploy(ctx, deployment("workers", "web", "default", "web:v2", "web")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, state.Key{NodeGroup: "batch", Name: "job"}); err != nil {
		t.Fatal(err)
	}
	fs.SetRules()
	if res, ix := sync(false); res.Rewritten != 2 || string(ix.NodeGroupView("batch")) != "{}\n" {
		t.Fatalf("sync after the commits %+v", res)
	}
}
