// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
)

// TestPausedLeaderWriteIsFenced stalls the leader's snapshot write in
// flight just after it decided to write, and cuts it from the lease:
// a follower takes over and writes a higher generation, and when the
// stalled write finally reaches the store it is refused. The stored
// generation never goes back.
func TestPausedLeaderWriteIsFenced(t *testing.T) {
	bucket := newBucket(t)
	// A request in flight lands even if its sender gives up on it: the
	// stall ignores cancellation and the bucket sees an uncancelled call.
	inFlight := faultstore.WithSleep(func(_ context.Context, d time.Duration) error { time.Sleep(d); return nil })
	stores := []*faultstore.Store{faultstore.New(detached{bucket}, inFlight), faultstore.New(detached{bucket}, inFlight)}
	agents := startLocalEach(t, func(i int) objstore.Store { return stores[i] }, 2, []coordinator.ServiceID{web})
	for _, a := range agents {
		a.coord.SetEndpoints([]coordinator.Endpoint{{Service: web, Addr: a.prefix.Addr().Next()}})
	}
	var l int
	eventually(t, 5*time.Second, "one leader with both endpoints stored", func() bool {
		n, i := leaderOf(agents)
		l = i
		s, err := coordinator.LoadDurable(t.Context(), bucket)
		return n == 1 && err == nil && s.Generation > 0 && len(agents[1-l].backends(web)) == 2
	})
	before, _ := readSnapshot(t, bucket)

	// Watch the stored generation for the rest of the test.
	var mu sync.Mutex
	var gens []uint64
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			if s, err := readSnapshot(t, bucket); err == nil {
				mu.Lock()
				if len(gens) == 0 || gens[len(gens)-1] != s.Generation {
					gens = append(gens, s.Generation)
				}
				mu.Unlock()
			}
			time.Sleep(time.Millisecond)
		}
	})

	stall := 3 * fastTiming.Timeout
	stores[l].SetRules(
		faultstore.Rule{Action: faultstore.Fail, Prefix: election.Key},
		faultstore.Rule{Action: faultstore.Delay, Latency: stall, Ops: []faultstore.Op{faultstore.OpPutIfMatch}, Prefix: coordinator.SnapshotKey, Limit: 1},
	)
	// A new endpoint makes the leader write; the write stalls.
	agents[l].coord.SetEndpoints([]coordinator.Endpoint{
		{Service: web, Addr: agents[l].prefix.Addr().Next()},
		{Service: web, Addr: agents[l].prefix.Addr().Next().Next()},
	})
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(agents[l].logs.String(), "a later leader wrote the snapshot") {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled write was not refused; the old leader logged:\n%s", agents[l].logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	wg.Wait()
	after, _ := readSnapshot(t, bucket)
	if after.Generation <= before.Generation || after.LeaderId == agents[l].id {
		t.Errorf("stored snapshot = generation %d by %s, want a later generation by the new leader (before: %d by %s)",
			after.Generation, after.LeaderId, before.Generation, before.LeaderId)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(gens); i++ {
		if gens[i] < gens[i-1] {
			t.Fatalf("stored generations went back: %v", gens)
		}
	}
	t.Logf("stored generations %v; the old leader's stalled write was refused", gens)
}

func readSnapshot(t *testing.T, s objstore.Store) (*pb.ServiceSnapshot, error) {
	obj, err := s.Get(context.Background(), coordinator.SnapshotKey, objstore.GetOptions{})
	if err != nil {
		return nil, err
	}
	return coordinator.Unmarshal(obj.Data)
}

// detached forwards calls without their cancellation, as a request already
// on the wire is not recalled.
type detached struct{ objstore.Store }

func (d detached) Get(ctx context.Context, key string, o objstore.GetOptions) (objstore.Object, error) {
	return d.Store.Get(context.WithoutCancel(ctx), key, o)
}

func (d detached) PutIfAbsent(ctx context.Context, key string, data []byte) (string, error) {
	return d.Store.PutIfAbsent(context.WithoutCancel(ctx), key, data)
}

func (d detached) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	return d.Store.PutIfMatch(context.WithoutCancel(ctx), key, data, etag)
}
