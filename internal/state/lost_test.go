// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/state"
)

// guarded is a committer that refuses a lost index, as every Podmin
// command's is.
func guarded(s objstore.Store) *state.Committer {
	return state.NewCommitter(s, state.CommitOptions{MaxAttempts: 4, Sleep: noSleep, RefuseLostIndex: true})
}

// keys lists every object of the bucket.
func keys(t *testing.T, s objstore.Store) []string {
	t.Helper()
	all, err := objstore.ListAll(context.Background(), s, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range all {
		out = append(out, o.Key)
	}
	return out
}

// TestLostIndexIsNeverAnsweredByAFreshOne: with the index gone and the
// bucket still holding the NodeGroup views its commits wrote, deploy and
// delete refuse before writing anything; in a new cluster deploy creates
// the index, with one LIST of one key as the only extra cost.
func TestLostIndexIsNeverAnsweredByAFreshOne(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	counted := faultstore.New(b)
	web := deployment("workers", "web", "default", "example/web:v1", "web")
	if res, err := guarded(counted).Deploy(ctx, web); err != nil || res.Outcome != state.Created {
		t.Fatalf("first deploy in a new cluster: %+v, %v", res, err)
	}
	if c := counted.Counts(); c.List != 1 {
		t.Errorf("first deploy in a new cluster: %d LISTs, want 1 (the views, one key)", c.List)
	}
	counted = faultstore.New(b)
	if _, err := guarded(counted).Deploy(ctx, deployment("workers", "api", "default", "example/api:v1", "")); err != nil {
		t.Fatal(err)
	}
	if c := counted.Counts(); c.List != 0 {
		t.Errorf("deploy into an existing index: %d LISTs, want none", c.List)
	}
	if err := b.Delete(ctx, state.IndexPath, ""); err != nil {
		t.Fatal(err)
	}
	before := keys(t, b)

	_, err := guarded(b).Deploy(ctx, deployment("workers", "db", "default", "example/db:v1", ""))
	var lost *state.IndexMissingError
	if !errors.As(err, &lost) || !errors.Is(err, state.ErrIndexMissing) || !strings.Contains(err.Error(), "podmin index rebuild") ||
		!strings.Contains(err.Error(), "NodeGroup view deployments/nodegroups/workers.json") {
		t.Fatalf("deploy over a lost index: %v, want ErrIndexMissing naming the view and podmin index rebuild", err)
	}
	if _, err := guarded(b).Delete(ctx, web.Key); !errors.Is(err, state.ErrIndexMissing) {
		t.Fatalf("delete over a lost index: %v, want ErrIndexMissing, not absent", err)
	}
	if _, err := guarded(b).Delete(ctx, state.Key{NodeGroup: "workers", Name: "never"}); !errors.Is(err, state.ErrIndexMissing) {
		t.Fatalf("delete of an unknown name over a lost index: %v, want ErrIndexMissing", err)
	}
	if after := keys(t, b); !slices.Equal(before, after) {
		t.Fatalf("the refusals wrote: %q, then %q", before, after)
	}
	if _, _, err := state.ReadDesiredIndex(ctx, b); !errors.Is(err, state.ErrIndexMissing) {
		t.Fatalf("ReadDesiredIndex over a lost index: %v", err)
	}

	// Only the views left: still a lost index.
	for _, k := range keys(t, b) {
		if strings.HasPrefix(k, state.NodeGroupsPrefix) || strings.HasPrefix(k, state.ServicesPrefix) {
			if err := b.Delete(ctx, k, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := guarded(b).Deploy(ctx, web); !errors.Is(err, state.ErrIndexMissing) || !strings.Contains(err.Error(), "NodeGroup view deployments/nodegroups/workers.json") {
		t.Fatalf("deploy with only a view left: %v, want ErrIndexMissing naming the view", err)
	}

	// Pod payloads without any view prove no commit: another first
	// deploy's, or one whose index write failed. A deploy goes on.
	orphans := newLocal(t)
	for _, k := range keys(t, b) {
		if strings.HasPrefix(k, state.NodeGroupsPrefix) {
			obj, err := b.Get(ctx, k, objstore.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := orphans.Put(ctx, k, obj.Data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if res, err := guarded(orphans).Deploy(ctx, web); err != nil || res.Outcome != state.Created {
		t.Fatalf("deploy beside payloads no commit named: %+v, %v, want the index created", res, err)
	}

	// A new cluster reads as empty.
	fresh := newLocal(t)
	if ix, etag, err := state.ReadDesiredIndex(ctx, fresh); err != nil || ix.Len() != 0 || etag != "" {
		t.Fatalf("ReadDesiredIndex of a new cluster: %v, %q, %v", ix, etag, err)
	}
	if res, err := guarded(fresh).Delete(ctx, web.Key); err != nil || res.Outcome != state.Absent {
		t.Fatalf("delete in a new cluster: %+v, %v, want absent", res, err)
	}
}

// TestLostIndexCheckFailureIsNotANewCluster: a LIST that fails leaves the
// meaning of the absence unknown; nothing is written.
func TestLostIndexCheckFailureIsNotANewCluster(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	s := faultstore.New(b, faultstore.WithRules(faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpList}}))
	if _, err := guarded(s).Deploy(ctx, deployment("workers", "web", "default", "example/web:v1", "")); err == nil || !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("deploy with a failing LIST: %v", err)
	}
	if k := keys(t, b); len(k) != 0 {
		t.Fatalf("deploy wrote %q although the absence could not be explained", k)
	}
	if _, _, err := state.ReadDesiredIndex(ctx, s); err == nil {
		t.Fatal("ReadDesiredIndex with a failing LIST read an empty index")
	}
}

// TestLostIndexOwnRetry: in a new cluster, a create-only index write
// whose reply is lost (and that did not land) is retried: the payloads
// this call wrote are not taken for a lost index.
func TestLostIndexOwnRetry(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	s := faultstore.New(b, faultstore.WithRules(faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpPutIfAbsent}, Prefix: state.IndexPath, Limit: 1}))
	res, err := guarded(s).Deploy(ctx, deployment("workers", "web", "default", "example/web:v1", ""))
	if err != nil || res.Outcome != state.Created {
		t.Fatalf("deploy after a lost reply in a new cluster: %+v, %v", res, err)
	}
	if c := s.Counts(); c.List != 1 {
		t.Errorf("%d LISTs, want the 1 of the first round only", c.List)
	}
}

// TestIndexVanishingDuringACommit: an index this call read that is gone
// in a later round was lost, whatever the bucket holds.
func TestIndexVanishingDuringACommit(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	if _, err := guarded(b).Deploy(ctx, deployment("workers", "web", "default", "example/web:v1", "")); err != nil {
		t.Fatal(err)
	}
	h := &fakeInterleaving{Store: b, before: func(n int) error {
		if n == 1 {
			return b.Delete(ctx, state.IndexPath, "")
		}
		return nil
	}}
	_, err := guarded(h).Deploy(ctx, deployment("workers", "api", "default", "example/api:v1", ""))
	if !errors.Is(err, state.ErrIndexMissing) || !strings.Contains(err.Error(), "it was there when this operation first read it") {
		t.Fatalf("deploy while the index vanished: %v, want ErrIndexMissing", err)
	}
	if _, err := b.Head(ctx, state.IndexPath); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("a fresh index was written: %v", err)
	}
}

// TestRebuildWithOnlyViews: a bucket that lost its index and every Pod
// payload but kept NodeGroup views (which make deploy refuse) can still be
// rebuilt: to an empty index, every name the views hold left out.
func TestRebuildWithOnlyViews(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	if _, err := guarded(b).Deploy(ctx, deployment("workers", "web", "default", "example/web:v1", "")); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys(t, b) {
		if !strings.HasPrefix(k, state.ViewsPrefix) {
			if err := b.Delete(ctx, k, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	plan, err := state.PlanRebuild(ctx, b, nil, nil)
	if err != nil {
		t.Fatalf("PlanRebuild with only views: %v", err)
	}
	if !plan.Missing || plan.Index.Len() != 0 || len(plan.Dropped) != 1 || plan.Dropped[0].Deployment != "workers/web" ||
		!strings.Contains(plan.Dropped[0].Reason, "deployments/nodegroups/workers.json") {
		t.Fatalf("plan %+v", plan)
	}
	if err := committer(b, 4).WriteRebuild(ctx, plan); err != nil {
		t.Fatal(err)
	}
	if res, err := guarded(b).Deploy(ctx, deployment("workers", "web", "default", "example/web:v2", "")); err != nil || res.Outcome != state.Created {
		t.Fatalf("deploy after the rebuild: %+v, %v", res, err)
	}
}
