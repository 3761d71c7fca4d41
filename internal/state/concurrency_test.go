// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

func TestConcurrentDistinctKeysLocal(t *testing.T) {
	testConcurrentDistinctKeys(t, newLocal(t), noSleepCommitter)
}

// The same with the production backoff and attempts: 32 writers at once
// all commit without any tuning.
func TestConcurrentDistinctKeysProductionBackoffLocal(t *testing.T) {
	testConcurrentDistinctKeys(t, newLocal(t), productionCommitter)
}

// noSleepCommitter retries without waiting, with enough attempts that each
// lost round (another writer's success) is covered.
func noSleepCommitter(s objstore.Store, writers int) *state.Committer { return committer(s, 2*writers) }

// productionCommitter uses the defaults the CLI uses.
func productionCommitter(s objstore.Store, _ int) *state.Committer {
	return state.NewCommitter(s, state.CommitOptions{})
}

func TestConcurrentServiceClaimLocal(t *testing.T) {
	for i := 0; i < 10; i++ {
		testConcurrentServiceClaim(t, newLocal(t))
	}
}

// testConcurrentDistinctKeys runs 32 committers on distinct keys at once:
// every one succeeds and no update is lost.
func testConcurrentDistinctKeys(t *testing.T, s objstore.Store, newCommitter func(objstore.Store, int) *state.Committer) {
	const writers = 32
	ctx := context.Background()
	start := make(chan struct{})
	results := make([]state.DeployResult, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := deployment([]string{"workers", "edge"}[i%2], fmt.Sprintf("app%d", i), "default", "example/app:v1", fmt.Sprintf("svc%d", i))
			// Each failed round is some other writer's success, so 32 rounds
			// always suffice.
			c := newCommitter(s, writers)
			<-start
			results[i], errs[i] = c.Deploy(ctx, d)
		}()
	}
	close(start)
	wg.Wait()
	ix := readIndex(t, s)
	for i := range writers {
		if errs[i] != nil {
			t.Fatalf("writer %d: %v", i, errs[i])
		}
		if e, ok := ix.Lookup(results[i].Key); !ok || e != results[i].Entry || results[i].Outcome != state.Created {
			t.Errorf("writer %d: result %+v, index has %+v, %v", i, results[i], e, ok)
		}
	}
	if ix.Len() != writers {
		t.Fatalf("index has %d entries, want %d", ix.Len(), writers)
	}
	checkBucket(t, s)
}

// testConcurrentServiceClaim races two deployments in different NodeGroups
// for one Service identity: exactly one wins, the other gets ErrConflict
// naming the winner.
func testConcurrentServiceClaim(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	ds := []state.Deployment{
		deployment("workers", "web", "product", "example/web:v1", "frontend"),
		deployment("edge", "web2", "product", "example/web:v2", "frontend"),
	}
	start := make(chan struct{})
	errs := make([]error, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := committer(s, 8)
			<-start
			_, errs[i] = c.Deploy(ctx, d)
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatal("both deployments claimed the Service")
			}
			winner = i
		case !errors.Is(err, state.ErrConflict):
			t.Fatalf("deployment %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("nobody won: %v", errs)
	}
	loser := 1 - winner
	checkErr(t, "loser", errs[loser], fmt.Sprintf(`Service "product/frontend" is already owned by deployment %q`, ds[winner].Key))
	ix := readIndex(t, s)
	owner, ok := ix.ServiceOwner(state.ServiceID{Namespace: "product", Name: "frontend"})
	if !ok || owner != ds[winner].Key || ix.Len() != 1 {
		t.Fatalf("owner %v, %v; %d entries", owner, ok, ix.Len())
	}
}

// checkBucket walks the payload prefixes: every object's bytes hash to the
// digest in its path (orphans included), and every index entry points at
// payloads that exist.
func checkBucket(t testing.TB, s objstore.Store) {
	t.Helper()
	ctx := context.Background()
	present := map[string]bool{}
	for _, prefix := range []string{state.NodeGroupsPrefix, state.ServicesPrefix} {
		infos, err := objstore.ListAll(ctx, s, prefix)
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range infos {
			obj, err := s.Get(ctx, info.Key, objstore.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := state.VerifyPayload(info.Key, obj.Data); err != nil {
				t.Errorf("bucket walk: %v", err)
			}
			present[info.Key] = true
		}
	}
	for _, it := range readIndex(t, s).Items() {
		if !present[it.Entry.Pod] || (it.Entry.Service != "" && !present[it.Entry.Service]) {
			t.Errorf("bucket walk: %s references a missing payload: %+v", it.Key, it.Entry)
		}
		if _, err := state.FetchPayload(ctx, s, it.Entry.Pod); err != nil {
			t.Error(err)
		}
	}
}

func TestCheckBucketFindsCorruption(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	res, err := committer(b, 4).Deploy(ctx, deployment("workers", "web", "default", "example/web:v1", ""))
	if err != nil {
		t.Fatal(err)
	}
	checkBucket(t, b)
	if _, err := b.Put(ctx, res.Entry.Pod, []byte("bit rot")); err != nil {
		t.Fatal(err)
	}
	_, err = state.FetchPayload(ctx, b, res.Entry.Pod)
	if !errors.Is(err, state.ErrCorruptPayload) {
		t.Fatalf("FetchPayload of a corrupt object: %v", err)
	}
}
