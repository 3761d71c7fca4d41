// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"context"
	"errors"
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
// is success: the key holds what this deploy asked for, and every reader
// sees the same bytes at the same content-addressed paths.
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
	if err != nil || res.Outcome != state.Created || h.n != 1 {
		t.Fatalf("%+v, %v after %d index writes", res, err, h.n)
	}
}

// A write that may have landed and then been superseded by a writer of the
// same key cannot be resolved: re-applying could apply it twice, reporting
// success could claim a state that is not there. It fails with
// ErrOutcomeUnknown and leaves the other writer's entry alone.
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
	_, err := committer(h, 4).Deploy(ctx, deployment("workers", "web", "default", "example/web:v1", ""))
	checkErr(t, "Deploy", err, `deploy "workers/web": outcome of the index write is unknown: the deployment changed to a third state after the failed write`)
	checkErr(t, "Deploy", err, `run "podmin list" to see whether it was applied and repeat the command if not`)
	if !errors.Is(err, state.ErrOutcomeUnknown) || !errors.Is(err, errLost) || h.n != 1 {
		t.Fatalf("err %v after %d index writes", err, h.n)
	}
	if e, _ := readIndex(t, b).Lookup(later.Key); e != laterEntry {
		t.Fatalf("entry %+v, want the later writer's %+v", e, laterEntry)
	}
}

// Running out of attempts while a write is unresolved spends one more read
// to resolve it: a write that did not land is a plain failure, one that may
// have is an unknown outcome, never a plain failure.
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
	_, err = committer(h, 1).Deploy(ctx, d)
	if !errors.Is(err, state.ErrOutcomeUnknown) {
		t.Fatalf("superseded last write: %v", err)
	}
}
