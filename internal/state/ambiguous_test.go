// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/state"
)

// An index write whose response is lost after it landed is resolved by
// re-reading: success, and the mutation is not written a second time.
func TestAmbiguousWriteThatLanded(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	h := faultstore.New(b, faultstore.WithRules(faultstore.Rule{
		Action: faultstore.Ambiguous, Ops: indexWrites, Prefix: state.IndexPath, Limit: 2,
	}))
	d := deployment("workers", "web", "default", "example/web:v1", "")
	res, err := committer(h, 4).Deploy(ctx, d)
	if c := h.Counts(); err != nil || res.Outcome != state.Created || c.Writes() != 2 || c.Get != 2 {
		t.Fatalf("%+v, %v after %+v", res, err, c)
	}
	if e, ok := readIndex(t, b).Lookup(d.Key); !ok || e != res.Entry {
		t.Fatalf("entry %+v, %v", e, ok)
	}
	h.ResetCounts()
	del, err := committer(h, 4).Delete(ctx, d.Key)
	if c := h.Counts(); err != nil || del.Outcome != state.Deleted || c.Writes() != 1 || c.Get != 2 {
		t.Fatalf("%+v, %v after %+v", del, err, c)
	}
}

// A write that failed without landing leaves the key at its pre-image; the
// mutation is applied again to the fresh index.
func TestAmbiguousWriteThatDidNotLand(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	other := committer(b, 4)
	h := &fakeInterleaving{Store: b, before: func(n int) error {
		if n == 1 {
			// Meanwhile another deployment lands; it must survive the retry.
			if _, err := other.Deploy(ctx, deployment("workers", "api", "default", "example/api:v1", "")); err != nil {
				return err
			}
			return errLost
		}
		return nil
	}}
	res, err := committer(h, 4).Deploy(ctx, deployment("workers", "web", "default", "example/web:v1", ""))
	if err != nil || res.Outcome != state.Created || h.n != 2 {
		t.Fatalf("%+v, %v after %d index writes", res, err, h.n)
	}
	if n := readIndex(t, b).Len(); n != 2 {
		t.Fatalf("index has %d entries, want 2", n)
	}
}

// Another writer committing exactly the same entry while our write is lost
// (not applied) is resolved by the write IDs, not by content: ours did not
// land, and applying the mutation again finds the entry already there, so
// the deploy is unchanged (the other writer created it).
func TestAmbiguousWriteSameChangeByAnother(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	d := deployment("workers", "web", "default", "example/web:v1", "")
	h := &fakeInterleaving{Store: b, before: func(n int) error {
		if n == 1 {
			if _, err := committer(b, 4).Deploy(ctx, d); err != nil {
				return err
			}
			return errLost
		}
		return nil
	}}
	res, err := committer(h, 4).Deploy(ctx, d)
	if err != nil || res.Outcome != state.Unchanged || h.n != 1 {
		t.Fatalf("%+v, %v after %d index writes", res, err, h.n)
	}
}

// A write that landed and was then superseded by a writer of the same key
// is still found in the index's chain of write IDs: success, reported
// against the version it replaced, and the later writer's entry stays.
func TestAmbiguousWriteSuperseded(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	later := deployment("workers", "web", "default", "example/web:v2", "")
	var laterEntry state.Entry
	h := &fakeInterleaving{Store: b, after: func(n int) error {
		if n == 1 {
			res, err := committer(b, 4).Deploy(ctx, later)
			laterEntry = res.Entry
			if err != nil {
				return err
			}
			return errLost
		}
		return nil
	}}
	res, err := committer(h, 4).Deploy(ctx, deployment("workers", "web", "default", "example/web:v1", ""))
	if err != nil || res.Outcome != state.Created || h.n != 1 {
		t.Fatalf("%+v, %v after %d index writes", res, err, h.n)
	}
	if e, _ := readIndex(t, b).Lookup(later.Key); e != laterEntry {
		t.Fatalf("entry %+v, want the later writer's %+v", e, laterEntry)
	}
}

// The ABA case: our write lands, its reply is lost, and another writer
// restores exactly the pre-image before we look. Comparing content would
// call that "did not land" and apply the deploy a second time; the write
// IDs prove it landed, so it is reported once and not written again.
func TestAmbiguousWriteRestoredPreImage(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	v1 := deployment("workers", "web", "default", "example/web:v1", "")
	if _, err := committer(b, 4).Deploy(ctx, v1); err != nil {
		t.Fatal(err)
	}
	h := &fakeInterleaving{Store: b, after: func(n int) error {
		if n == 1 {
			if _, err := committer(b, 4).Deploy(ctx, v1); err != nil { // back to v1
				return err
			}
			return errLost
		}
		return nil
	}}
	res, err := committer(h, 4).Deploy(ctx, deployment("workers", "web", "default", "example/web:v2", ""))
	if err != nil || res.Outcome != state.Updated || h.n != 1 {
		t.Fatalf("%+v, %v after %d index writes", res, err, h.n)
	}
	v1Entry, _ := entryOf(v1)
	if e, _ := readIndex(t, b).Lookup(v1.Key); e != v1Entry {
		t.Fatalf("entry %+v, want the restored %+v", e, v1Entry)
	}
}

// When more writes followed a lost reply than the index records IDs of,
// nothing can be proven either way: the outcome is reported unknown and
// nothing is re-applied.
func TestAmbiguousWriteBeyondTheChain(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	h := &fakeInterleaving{Store: b, after: func(n int) error {
		if n == 1 {
			other := committer(b, 4)
			for i := range 120 {
				if _, err := other.Deploy(ctx, deployment("workers", "api", "default", fmt.Sprintf("example/api:v%d", i), "")); err != nil {
					return err
				}
			}
			return errLost
		}
		return nil
	}}
	_, err := committer(h, 4).Deploy(ctx, deployment("workers", "web", "default", "example/web:v1", ""))
	checkErr(t, "Deploy", err, `deploy "workers/web": outcome of the index write is unknown: more than 95 index writes followed the failed write`)
	checkErr(t, "Deploy", err, `run "podmin list" to see whether it was applied and repeat the command if not`)
	if !errors.Is(err, state.ErrOutcomeUnknown) || !errors.Is(err, errLost) || h.n != 1 {
		t.Fatalf("err %v after %d index writes", err, h.n)
	}
}

// Running out of attempts while a write is unresolved spends one more read
// to resolve it: a write that did not land is a plain failure, one that
// landed (even if superseded since) is a success.
func TestAmbiguousWriteAtLastAttempt(t *testing.T) {
	ctx := context.Background()
	d := deployment("workers", "web", "default", "example/web:v1", "")

	fs := faultstore.New(newLocal(t), faultstore.WithRules(faultstore.Rule{
		Action: faultstore.Fail, Ops: indexWrites, Prefix: state.IndexPath, Err: errLost,
	}))
	_, err := committer(fs, 3).Deploy(ctx, d)
	checkErr(t, "Deploy (never lands)", err, "gave up after 3 attempts: write deployments/index.json")
	if errors.Is(err, state.ErrOutcomeUnknown) || fs.Counts().PutIfAbsent != 3+1 {
		t.Fatalf("err %v after %+v", err, fs.Counts())
	}

	fs = faultstore.New(newLocal(t), faultstore.WithRules(faultstore.Rule{
		Action: faultstore.Ambiguous, Ops: indexWrites, Prefix: state.IndexPath,
	}))
	res, err := committer(fs, 1).Deploy(ctx, d)
	if err != nil || res.Outcome != state.Created || fs.Counts().PutIfAbsent != 1+1 {
		t.Fatalf("last write landed: %+v, %v after %+v", res, err, fs.Counts())
	}

	b := newLocal(t)
	h := &fakeInterleaving{Store: b}
	h.after = func(int) error {
		if _, err := committer(b, 4).Deploy(ctx, deployment("workers", "web", "default", "example/web:v2", "")); err != nil {
			return err
		}
		return errLost
	}
	res, err = committer(h, 1).Deploy(ctx, d)
	if err != nil || res.Outcome != state.Created {
		t.Fatalf("superseded last write: %+v, %v", res, err)
	}
}
