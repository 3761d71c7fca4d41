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
	"sync"
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/state"
)

// model is the sequential specification of the index: the operations that
// reported success, applied in order.
type model struct {
	entries map[state.Key]state.Entry
}

func (m *model) owner(id state.ServiceID) (state.Key, bool) {
	for k, e := range m.entries {
		if eid, ok := e.ServiceID(); ok && eid == id {
			return k, true
		}
	}
	return state.Key{}, false
}

// TestFaultsMatchSequentialModel runs 200 seeded deploy/delete operations
// with 30% ambiguous index writes, 10% index writes failing before the
// call and 30% failing payload writes. After every operation the bucket
// holds exactly the model of the operations that reported success: nothing
// reported success without landing, nothing failed yet landed, nothing was
// applied twice.
func TestFaultsMatchSequentialModel(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runFaults(t, seed, newLocal(t)) })
	}
}

func runFaults(t *testing.T, seed uint64, b objstore.Store) {
	ctx := context.Background()
	fs := faultstore.New(b, faultstore.WithSeed(seed), faultstore.WithRules(
		faultstore.Rule{Action: faultstore.Fail, Ops: indexWrites, Prefix: state.IndexPath, Probability: 0.1},
		faultstore.Rule{Action: faultstore.Ambiguous, Ops: indexWrites, Prefix: state.IndexPath, Probability: 0.3},
		faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpPutIfAbsent}, Prefix: state.NodeGroupsPrefix, Probability: 0.3},
		faultstore.Rule{Action: faultstore.Ambiguous, Ops: []faultstore.Op{faultstore.OpPutIfAbsent}, Prefix: state.ServicesPrefix, Probability: 0.3},
	))
	c := committer(fs, 16)
	rng := rand.New(rand.NewPCG(seed, 42))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	m := &model{entries: map[state.Key]state.Entry{}}
	var succeeded, failed, conflicts int
	for op := range 200 {
		key := state.Key{NodeGroup: pick("workers", "edge"), Name: pick("web", "api", "db")}
		before, existed := m.entries[key]
		var err error
		if rng.IntN(4) == 0 {
			var res state.DeleteResult
			res, err = c.Delete(ctx, key)
			switch {
			case err != nil:
				failed++
			case res.Outcome != map[bool]state.Outcome{true: state.Deleted, false: state.Absent}[existed]:
				t.Fatalf("op %d: delete %s: outcome %s, model had entry: %v", op, key, res.Outcome, existed)
			default:
				succeeded++
				delete(m.entries, key)
			}
		} else {
			d := deployment(key.NodeGroup, key.Name, pick("default", "product"), pick("x:v1", "x:v2"), pick("", "frontend", "backend"))
			var res state.DeployResult
			res, err = c.Deploy(ctx, d)
			switch {
			case errors.Is(err, state.ErrConflict):
				conflicts++
				id := state.ServiceID{Namespace: d.Namespace, Name: d.ServiceName}
				if owner, ok := m.owner(id); !ok || owner == key {
					t.Fatalf("op %d: deploy %s: %v, but the model's owner of %s is %v (%v)", op, key, err, id, owner, ok)
				}
			case err != nil:
				failed++
			default:
				succeeded++
				want := state.Created
				if existed {
					want = map[bool]state.Outcome{true: state.Unchanged, false: state.Updated}[before == res.Entry]
				}
				if res.Outcome != want {
					t.Fatalf("op %d: deploy %s: outcome %s, want %s", op, key, res.Outcome, want)
				}
				m.entries[key] = res.Entry
			}
		}
		// With one writer an ambiguous index write always resolves, so the
		// only failures are payload writes, before the index is touched.
		if err != nil && !errors.Is(err, state.ErrConflict) &&
			(errors.Is(err, state.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "payload")) {
			t.Fatalf("op %d: unexpected failure: %v", op, err)
		}
		assertModel(t, fmt.Sprintf("after op %d", op), b, m)
	}
	inj := fs.Injected()
	t.Logf("seed %d: %d succeeded, %d failed, %d conflicts; injected %+v", seed, succeeded, failed, conflicts, inj)
	if inj.PutIfMatch+inj.PutIfAbsent < 30 || failed == 0 || succeeded < 50 {
		t.Fatalf("the run exercised too little: %d succeeded, %d failed, injected %+v", succeeded, failed, inj)
	}
	checkBucket(t, b)
}

// assertModel compares the committed index, read past the fault wrapper,
// with the model.
func assertModel(t *testing.T, when string, s objstore.Store, m *model) {
	t.Helper()
	ix := readIndex(t, s)
	if ix.Len() != len(m.entries) {
		t.Fatalf("%s: index has %d entries, model %d", when, ix.Len(), len(m.entries))
	}
	for k, want := range m.entries {
		if got, ok := ix.Lookup(k); !ok || got != want {
			t.Fatalf("%s: %s is %+v (%v) in the index, %+v in the model", when, k, got, ok, want)
		}
	}
}

// TestFaultsConcurrentWriters runs 8 writers at once, each deploying and
// deleting its own key 25 times under the same faults. Every ambiguous
// write here landed, so its re-read finds its write ID, or, when a stale
// write over a content-equal version erased the ID, still finds the
// writer's own key as it left it (nobody else writes that key): no outcome
// is unknown, and every key ends as its writer's sequential model.
func TestFaultsConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	fs := faultstore.New(b, faultstore.WithSeed(7), faultstore.WithRules(
		faultstore.Rule{Action: faultstore.Ambiguous, Ops: indexWrites, Prefix: state.IndexPath, Probability: 0.3},
		faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpPutIfAbsent}, Prefix: state.NodeGroupsPrefix, Probability: 0.3},
	))
	const writers = 8
	final := make([]*state.Entry, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := committer(fs, 64)
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			name := fmt.Sprintf("app%d", w)
			for op := range 25 {
				if rng.IntN(3) == 0 {
					if _, err := c.Delete(ctx, state.Key{NodeGroup: "workers", Name: name}); err != nil {
						errs[w] = fmt.Errorf("op %d: %w", op, err)
						return
					}
					final[w] = nil
					continue
				}
				d := deployment("workers", name, "default", fmt.Sprintf("x:v%d", rng.IntN(3)), fmt.Sprintf("svc%d", w))
				res, err := c.Deploy(ctx, d)
				switch {
				case err == nil:
					final[w] = &res.Entry
				case errors.Is(err, state.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "payload"):
					errs[w] = fmt.Errorf("op %d: %w", op, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	m := &model{entries: map[state.Key]state.Entry{}}
	for w := range writers {
		if errs[w] != nil {
			t.Fatalf("writer %d: %v", w, errs[w])
		}
		if final[w] != nil {
			m.entries[state.Key{NodeGroup: "workers", Name: fmt.Sprintf("app%d", w)}] = *final[w]
		}
	}
	t.Logf("injected %+v", fs.Injected())
	assertModel(t, "after all writers", b, m)
	checkBucket(t, b)
}
