// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"context"
	"testing"

	"podmin.dev/podmin/internal/cache"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/state"
)

func TestRequestCountsLocal(t *testing.T) {
	testRequestCounts(t, func(t *testing.T) objstore.Store { return newLocal(t) })
}

// testRequestCounts checks the exact requests each kind of commit makes:
// the index is read once, only changes write it, and existing payloads are
// verified rather than rewritten.
func testRequestCounts(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	ctx := context.Background()
	fs := faultstore.New(newStore(t))
	c := state.NewCommitter(fs, state.CommitOptions{MaxAttempts: 4, Sleep: noSleep, Cache: state.ScopedCache(cache.Open(t.TempDir(), 0), "test bucket")})
	step := func(name string, want faultstore.Counts, run func() (state.Outcome, error), outcome state.Outcome) {
		t.Helper()
		fs.ResetCounts()
		got, err := run()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got != outcome {
			t.Errorf("%s: outcome %q, want %q", name, got, outcome)
		}
		if c := fs.Counts(); c != want {
			t.Errorf("%s: requests %+v, want %+v", name, c, want)
		}
	}
	deploy := func(d state.Deployment) func() (state.Outcome, error) {
		return func() (state.Outcome, error) { r, err := c.Deploy(ctx, d); return r.Outcome, err }
	}
	del := func(ng, name string) func() (state.Outcome, error) {
		return func() (state.Outcome, error) {
			r, err := c.Delete(ctx, state.Key{NodeGroup: ng, Name: name})
			return r.Outcome, err
		}
	}
	web := deployment("workers", "web", "product", "example/web:v1", "frontend")

	// No index yet: one read (404), two payload writes, one create-only index
	// write, and the NodeGroup's view after it (every index write below is
	// followed by its one view write).
	step("first deployment", faultstore.Counts{Get: 1, PutIfAbsent: 3, Put: 1}, deploy(web), state.Created)
	// A second new deployment: one read, two payload writes, one If-Match write.
	step("new deployment", faultstore.Counts{Get: 1, PutIfAbsent: 2, PutIfMatch: 1, Put: 1},
		deploy(deployment("workers", "api", "product", "example/api:v1", "api")), state.Created)
	// Identical re-deploy: the index read, and one Head per payload whose
	// stamp matches the one recorded when it was written.
	step("identical re-deploy", faultstore.Counts{Get: 1, Head: 2}, deploy(web), state.Unchanged)
	// New Pod, same Service: only the new Pod is created; the Service
	// payload the index references is proven present by a Head; the old
	// Pod is never read.
	step("update", faultstore.Counts{Get: 1, Head: 1, PutIfAbsent: 1, PutIfMatch: 1, Put: 1},
		deploy(deployment("workers", "web", "product", "example/web:v2", "frontend")), state.Updated)
	// Dropping the Service drops the Pod's podmin.dev/service annotation:
	// a new Pod payload.
	step("drop Service", faultstore.Counts{Get: 1, PutIfAbsent: 1, PutIfMatch: 1, Put: 1},
		deploy(deployment("workers", "web", "product", "example/web:v2", "")), state.Updated)
	// A same-named DaemonSet from another namespace, old entry without a
	// Service: the old namespace comes from the local payload cache.
	var replaced *state.Replacement
	step("other namespace", faultstore.Counts{Get: 1, PutIfAbsent: 1, PutIfMatch: 1, Put: 1}, func() (state.Outcome, error) {
		r, err := c.Deploy(ctx, deployment("workers", "web", "staging", "example/web:v2", ""))
		replaced = r.Replaced
		return r.Outcome, err
	}, state.Updated)
	if replaced == nil || replaced.Namespace != "product" {
		t.Errorf("other namespace: replaced %+v, want namespace product", replaced)
	}
	// A rollback to a payload no entry references any more: its stamp
	// from when it was written makes one Head enough.
	step("rollback", faultstore.Counts{Get: 1, Head: 1, PutIfMatch: 1, Put: 1},
		deploy(deployment("workers", "web", "product", "example/web:v2", "")), state.Updated)
	step("forward again", faultstore.Counts{Get: 1, Head: 1, PutIfMatch: 1, Put: 1},
		deploy(deployment("workers", "web", "staging", "example/web:v2", "")), state.Updated)
	// Delete: one read, one write and the view; an absent entry is read only.
	step("delete", faultstore.Counts{Get: 1, PutIfMatch: 1, Put: 1}, del("workers", "web"), state.Deleted)
	step("delete absent", faultstore.Counts{Get: 1}, del("workers", "web"), state.Absent)
	// Without a warm cache the replaced namespace costs one read of the old
	// Pod, after the index write.
	cold := faultstore.New(newStore(t))
	cc := committer(cold, 4)
	if _, err := cc.Deploy(ctx, deployment("workers", "web", "product", "example/web:v1", "")); err != nil {
		t.Fatal(err)
	}
	cold.ResetCounts()
	r, err := cc.Deploy(ctx, deployment("workers", "web", "staging", "example/web:v1", ""))
	if err != nil || r.Replaced == nil || r.Replaced.Namespace != "product" {
		t.Fatalf("cold cache replacement: %+v, %v", r, err)
	}
	if got := cold.Counts(); got != (faultstore.Counts{Get: 2, PutIfAbsent: 1, PutIfMatch: 1, Put: 1}) {
		t.Errorf("cold cache replacement: requests %+v", got)
	}
	// Without stamps a rollback verifies the existing payload's bytes (and,
	// without a cache, reads the replaced Pod for its namespace). The
	// payload is one the entry's revisions name, so it is expected to
	// exist: a Head finds it before its bytes are read.
	cold.ResetCounts()
	if r, err := cc.Deploy(ctx, deployment("workers", "web", "product", "example/web:v1", "")); err != nil || r.Outcome != state.Updated {
		t.Fatalf("cold rollback: %+v, %v", r, err)
	}
	if got := cold.Counts(); got != (faultstore.Counts{Get: 3, Head: 1, PutIfMatch: 1, Put: 1}) {
		t.Errorf("cold rollback: requests %+v", got)
	}
	fresh := faultstore.New(newStore(t))
	if r, err := committer(fresh, 4).Delete(ctx, web.Key); err != nil || r.Outcome != state.Absent {
		t.Fatalf("delete without an index: %+v, %v", r, err)
	}
	if c := fresh.Counts(); c != (faultstore.Counts{Get: 1}) {
		t.Errorf("delete without an index: requests %+v, want one Get", c)
	}
}

// A payload write that fails aborts the deploy before the index is written.
func TestPayloadWriteFailureAbortsBeforeIndex(t *testing.T) {
	ctx := context.Background()
	for _, action := range []faultstore.Action{faultstore.Fail, faultstore.Ambiguous} {
		t.Run(action.String(), func(t *testing.T) {
			b := newLocal(t)
			fs := faultstore.New(b, faultstore.WithRules(faultstore.Rule{
				Action: action, Ops: []faultstore.Op{faultstore.OpPutIfAbsent}, Prefix: state.ServicesPrefix,
			}))
			d := deployment("workers", "web", "product", "example/web:v1", "frontend")
			_, err := committer(fs, 4).Deploy(ctx, d)
			checkErr(t, "Deploy", err, "the deployment index was not changed; run deploy again")
			if c := fs.Counts(); c != (faultstore.Counts{Get: 1, PutIfAbsent: 2}) {
				t.Fatalf("requests %+v: the index was written", c)
			}
			// Whatever was orphaned, the next deploy succeeds and verifies it.
			fs.SetRules()
			res, err := committer(fs, 4).Deploy(ctx, d)
			if err != nil || res.Outcome != state.Created {
				t.Fatalf("retry: %+v, %v", res, err)
			}
		})
	}
}
