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

// A write whose reply was lost, read back while the index is still the
// version it replaced (same write ID), provably did not land: the mutation
// is applied again.
func TestAmbiguousWriteThatDidNotLand(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	h := &fakeInterleaving{Store: b, before: func(n int) error {
		if n == 1 {
			return errLost
		}
		return nil
	}}
	res, err := committer(h, 4).Deploy(ctx, deployment("workers", "web", "default", "example/web:v1", ""))
	if err != nil || res.Outcome != state.Created || res.LostReply || h.n != 2 {
		t.Fatalf("%+v, %v after %d index writes", res, err, h.n)
	}
}

// A write the store certainly did not apply (the request never reached
// it) needs no proof: it is retried like a lost race, whatever other
// writers did meanwhile.
func TestWriteNotAppliedIsRetried(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	other := committer(b, 4)
	h := &fakeInterleaving{Store: b, before: func(n int) error {
		if n == 1 {
			if _, err := other.Deploy(ctx, deployment("workers", "api", "default", "example/api:v1", "")); err != nil {
				return err
			}
			return fmt.Errorf("dial tcp: connection refused: %w", objstore.ErrNotApplied)
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

// A lost reply followed by another writer's commit cannot be resolved: the
// later version's chain of write IDs may have been written by a stale
// writer over a version whose content returned to an earlier one, so it is
// no proof that this write is absent. The outcome is unknown, and the
// mutation is not applied again.
func TestAmbiguousWriteAfterAnotherWriter(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	other := committer(b, 4)
	if _, err := other.Deploy(ctx, deployment("workers", "db", "default", "example/db:v1", "")); err != nil {
		t.Fatal(err)
	}
	h := &fakeInterleaving{Store: b, before: func(n int) error {
		if n == 1 {
			if _, err := other.Deploy(ctx, deployment("workers", "api", "default", "example/api:v1", "")); err != nil {
				return err
			}
			return errLost
		}
		return nil
	}}
	_, err := committer(h, 4).Deploy(ctx, deployment("workers", "web", "default", "example/web:v1", ""))
	checkErr(t, "Deploy", err, `deploy "workers/web": outcome of the index write is unknown: another writer changed the index before the failed write could be confirmed`)
	checkErr(t, "Deploy", err, `run "podmin list" to see whether it was applied and repeat the command if not`)
	if !errors.Is(err, state.ErrOutcomeUnknown) || !errors.Is(err, errLost) || h.n != 1 {
		t.Fatalf("err %v after %d index writes", err, h.n)
	}
	ix := readIndex(t, b)
	if _, ok := ix.Lookup(state.Key{NodeGroup: "workers", Name: "web"}); ok || ix.Len() != 2 {
		t.Fatalf("index has %d entries, web among them: %v", ix.Len(), ok)
	}
}

// Another writer committing exactly the same entry while our write is lost
// (not applied) leaves the outcome of our write unprovable, but the index
// read afterwards already holds the entry: the deploy succeeds as unchanged
// without writing again, and says that its reply was lost.
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
	if err != nil || res.Outcome != state.Unchanged || !res.LostReply || h.n != 1 {
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
// nothing is re-applied. When the index then still holds the deployed
// entry, the deploy is done whoever wrote it.
func TestAmbiguousWriteBeyondTheChain(t *testing.T) {
	ctx := context.Background()
	for _, deleteAfter := range []bool{true, false} {
		b := newLocal(t)
		web := deployment("workers", "web", "default", "example/web:v1", "")
		h := &fakeInterleaving{Store: b, after: func(n int) error {
			if n == 1 {
				other := committer(b, 4)
				for i := range 120 {
					if _, err := other.Deploy(ctx, deployment("workers", "api", "default", fmt.Sprintf("example/api:v%d", i), "")); err != nil {
						return err
					}
				}
				if deleteAfter {
					if _, err := other.Delete(ctx, web.Key); err != nil {
						return err
					}
				}
				return errLost
			}
			return nil
		}}
		res, err := committer(h, 4).Deploy(ctx, web)
		if !deleteAfter {
			if err != nil || res.Outcome != state.Unchanged || !res.LostReply || h.n != 1 {
				t.Fatalf("entry still there: %+v, %v after %d index writes", res, err, h.n)
			}
			continue
		}
		checkErr(t, "Deploy", err, `deploy "workers/web": outcome of the index write is unknown: the index records the IDs of the last 23 writes, and neither the failed write's nor that of the version it replaced is among them`)
		checkErr(t, "Deploy", err, `run "podmin list" to see whether it was applied and repeat the command if not`)
		if !errors.Is(err, state.ErrOutcomeUnknown) || !errors.Is(err, errLost) || h.n != 1 {
			t.Fatalf("err %v after %d index writes", err, h.n)
		}
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

func TestLostReplyWithContentEqualReturnLocal(t *testing.T) {
	testLostReplyWithContentEqualReturn(t, newLocal(t))
}

// testLostReplyWithContentEqualReturn is the sequence that once applied a
// deploy twice. W1's deploy of a3 lands and its reply is lost. W8 deletes
// a3, which returns the index to the exact bytes of the version W1
// replaced. W2, which read that version before W1 wrote, deletes a1 with
// If-Match on its ETag: ETags are hashes of the body, so the condition
// holds again, and W2's write records the old version's chain of write
// IDs, erasing W1's and W8's. Reading "the base's ID without mine" as "did
// not land" would apply a3 a second time, after W8 deleted it. W1 must
// report an unknown outcome and write nothing more.
func testLostReplyWithContentEqualReturn(t *testing.T, b objstore.Store) {
	ctx := context.Background()
	setup := committer(b, 4)
	for _, name := range []string{"a1", "a2"} {
		if _, err := setup.Deploy(ctx, deployment("workers", name, "default", "example/"+name+":v1", "")); err != nil {
			t.Fatal(err)
		}
	}
	a1, a3 := state.Key{NodeGroup: "workers", Name: "a1"}, state.Key{NodeGroup: "workers", Name: "a3"}

	// W2 reads the index, then waits inside its write until released.
	read, release, w2done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	w2store := &fakeInterleaving{Store: b, before: func(n int) error {
		if n == 1 {
			close(read)
			<-release
		}
		return nil
	}}
	var w2 state.DeleteResult
	var w2err error
	go func() {
		defer close(w2done)
		w2, w2err = committer(w2store, 4).Delete(ctx, a1)
	}()
	<-read

	var w8 state.DeleteResult
	var w8err error
	w1store := &fakeInterleaving{Store: b, after: func(n int) error {
		if n != 1 {
			return nil
		}
		w8, w8err = committer(b, 4).Delete(ctx, a3)
		close(release)
		<-w2done
		return errLost
	}}
	const w1ID = "00000000000000a3" // the ID of W1's first write; later ones differ
	writes := 0
	w1 := state.NewCommitter(w1store, state.CommitOptions{MaxAttempts: 4, Sleep: noSleep, NewWriteID: func() string {
		writes++
		return fmt.Sprintf("%014x%02x", 0, 0xa2+writes)
	}})
	_, err := w1.Deploy(ctx, deployment("workers", "a3", "default", "example/a3:v1", ""))

	if w8err != nil || w8.Outcome != state.Deleted || w2err != nil || w2.Outcome != state.Deleted {
		t.Fatalf("W8 %+v, %v; W2 %+v, %v", w8, w8err, w2, w2err)
	}
	// The premise: W2's stale write landed and erased W1's write ID.
	obj, gerr := b.Get(ctx, state.IndexPath, objstore.GetOptions{})
	if gerr != nil {
		t.Fatal(gerr)
	}
	if strings.Contains(obj.Metadata[state.WriteIDMeta]+obj.Metadata[state.WriteChainMeta], w1ID) {
		t.Fatalf("W1's write ID survived (%v): the sequence did not reproduce the erasure", obj.Metadata)
	}
	if !errors.Is(err, state.ErrOutcomeUnknown) || w1store.n != 1 {
		t.Fatalf("W1: %v after %d index writes; want an unknown outcome and no second write", err, w1store.n)
	}
	checkErr(t, "W1", err, "another writer changed the index before the failed write could be confirmed")
	ix := readIndex(t, b)
	if _, ok := ix.Lookup(a3); ok || ix.Len() != 1 {
		t.Fatalf("index %s: a3 is back after W8 deleted it, or W2's delete was lost", ix.Encode())
	}
}
