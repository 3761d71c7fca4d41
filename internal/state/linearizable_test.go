// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/state"
)

// opKey labels a request's context with the operation that made it, so the
// store beneath the faults can attribute every applied write.
type opKey struct{}

// appliedWrite is one index write the store applied, in the order the store
// applied them: the serial history of the index.
type appliedWrite struct {
	op            int
	before, after *state.Index
}

// fakeHistory sits beneath the fault injection and records every index
// write the store applied, whether or not its reply reached the caller.
// Index writes are serialized through it so that each one's pre-image is
// exact; reads run freely.
type fakeHistory struct {
	objstore.Store
	mu     sync.Mutex
	writes []appliedWrite
}

func (h *fakeHistory) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.writes)
}

func (h *fakeHistory) record(ctx context.Context, key string, data []byte, write func() (string, error)) (string, error) {
	if key != state.IndexPath {
		return write()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	before := state.NewIndex()
	if obj, err := h.Store.Get(ctx, key, objstore.GetOptions{}); err == nil {
		if before, err = state.DecodeIndex(obj.Data); err != nil {
			return "", err
		}
	}
	etag, err := write()
	if err == nil {
		after, derr := state.DecodeIndex(data)
		if derr != nil {
			return "", derr
		}
		op, _ := ctx.Value(opKey{}).(int)
		h.writes = append(h.writes, appliedWrite{op: op, before: before, after: after})
	}
	return etag, err
}

func (h *fakeHistory) PutIfAbsent(ctx context.Context, key string, data []byte) (string, error) {
	return h.record(ctx, key, data, func() (string, error) { return h.Store.PutIfAbsent(ctx, key, data) })
}

func (h *fakeHistory) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	return h.record(ctx, key, data, func() (string, error) { return h.Store.PutIfMatch(ctx, key, data, etag) })
}

func (h *fakeHistory) Put(ctx context.Context, key string, data []byte) (string, error) {
	return h.record(ctx, key, data, func() (string, error) { return h.Store.Put(ctx, key, data) })
}

// Open streams reads from the inner store.
func (h *fakeHistory) Open(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	return objstore.OpenObject(ctx, h.Store, key, opts)
}

// Write records index writes made with options (the write IDs).
func (h *fakeHistory) Write(ctx context.Context, key string, body io.Reader, size int64, opts objstore.PutOptions) (string, error) {
	data, err := objstore.ReadExactly(body, size)
	if err != nil {
		return "", err
	}
	return h.record(ctx, key, data, func() (string, error) {
		return objstore.WriteObject(ctx, h.Store, key, bytes.NewReader(data), size, opts)
	})
}

// linOp is one operation as its caller saw it.
type linOp struct {
	id         int
	delete     bool
	key        state.Key
	target     state.Entry // deploy only
	outcome    state.Outcome
	err        error
	start, end int // history length when the operation began and ended
}

func (o linOp) String() string {
	if o.delete {
		return fmt.Sprintf("op %d delete %s", o.id, o.key)
	}
	return fmt.Sprintf("op %d deploy %s=%s", o.id, o.key, shortEntry(o.target))
}

func shortEntry(e state.Entry) string {
	s := e.Pod[len(e.Pod)-12:]
	if e.Service != "" {
		s += "+" + e.Service[:strings.Index(e.Service, "/sha512/")]
	}
	return s
}

func TestLostRepliesAreLinearizableLocal(t *testing.T) {
	runLostReplies(t, newLocal(t), 8, 130)
}

// runLostReplies runs writers that deploy and delete the same few keys at
// once while half of all index-write replies are dropped after the write
// was applied, and checks every reported outcome against the store's own
// serial history of applied writes:
//
//   - each applied write is exactly its operation's mutation applied to the
//     version it replaced (no lost update, nothing else changed);
//   - no operation is applied twice;
//   - created/updated/deleted was applied exactly once, against a pre-image
//     that makes that outcome true; unchanged/absent wrote nothing and the
//     key held the target at some version during the operation;
//   - a failure other than ErrOutcomeUnknown was not applied.
//
// Together these place every operation at one point of one serial order.
func runLostReplies(t *testing.T, b objstore.Store, writers, opsPerWriter int) {
	ctx := context.Background()
	hist := &fakeHistory{Store: b}
	fs := faultstore.New(hist, faultstore.WithSeed(11), faultstore.WithRules(
		faultstore.Rule{Action: faultstore.Ambiguous, Ops: indexWrites, Prefix: state.IndexPath, Probability: 0.5},
		faultstore.Rule{Action: faultstore.Fail, Ops: indexWrites, Prefix: state.IndexPath, Probability: 0.05},
		faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpPutIfAbsent}, Prefix: state.NodeGroupsPrefix, Probability: 0.05},
	))
	keys := []state.Key{{NodeGroup: "workers", Name: "web"}, {NodeGroup: "workers", Name: "api"}}
	ops := make([][]linOp, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Real, short backoff: other writers act inside the window
			// between a lost reply and its resolution.
			c := state.NewCommitter(fs, state.CommitOptions{MaxAttempts: 64, BaseDelay: time.Millisecond, MaxDelay: 8 * time.Millisecond})
			rng := rand.New(rand.NewPCG(uint64(w), 5))
			for i := range opsPerWriter {
				id := w*opsPerWriter + i + 1
				octx := context.WithValue(ctx, opKey{}, id)
				op := linOp{id: id, key: keys[rng.IntN(len(keys))], start: hist.len()}
				if rng.IntN(4) == 0 {
					op.delete = true
					var res state.DeleteResult
					res, op.err = c.Delete(octx, op.key)
					op.outcome = res.Outcome
				} else {
					// Few distinct entries, so writers keep restoring
					// each other's earlier values (the ABA case).
					svc := []string{"", "front"}[rng.IntN(2)]
					if svc != "" {
						svc += "-" + op.key.Name
					}
					d := deployment(op.key.NodeGroup, op.key.Name, "default", fmt.Sprintf("x:v%d", rng.IntN(2)), svc)
					var res state.DeployResult
					res, op.err = c.Deploy(octx, d)
					op.outcome, op.target = res.Outcome, res.Entry
					if op.err != nil {
						op.target, _ = entryOf(d)
					}
				}
				op.end = hist.len()
				ops[w] = append(ops[w], op)
			}
		}()
	}
	wg.Wait()
	var all []linOp
	for _, o := range ops {
		all = append(all, o...)
	}
	checkLinearizable(t, hist.writes, all)
	t.Logf("%d operations, %d applied index writes, injected %+v", len(all), len(hist.writes), fs.Injected())
}

// entryOf is the entry a deployment commits.
func entryOf(d state.Deployment) (state.Entry, error) {
	var e state.Entry
	var err error
	if e.Pod, err = state.PodPayloadPath(d.Key.NodeGroup, d.Pod); err != nil {
		return e, err
	}
	if d.ServiceName != "" {
		e.Service, err = state.ServicePayloadPath(d.Namespace, d.ServiceName, d.Service)
	}
	return e, err
}

func checkLinearizable(t *testing.T, writes []appliedWrite, ops []linOp) {
	t.Helper()
	byID := map[int]linOp{}
	for _, o := range ops {
		byID[o.id] = o
	}
	// Replay the history: versions[v] is the index after v writes.
	versions := []*state.Index{state.NewIndex()}
	applied := map[int][]int{} // op → positions of its writes (1-based)
	for i, w := range writes {
		pos := i + 1
		o, ok := byID[w.op]
		if !ok {
			t.Fatalf("write %d belongs to no operation", pos)
		}
		prev := versions[len(versions)-1]
		if !equalIndex(prev, w.before) {
			t.Fatalf("write %d (%v) replaced a version that is not the previous one", pos, o)
		}
		want := cloneIndex(t, prev)
		if o.delete {
			want.Remove(o.key)
		} else if _, _, err := want.Set(o.key, o.target); err != nil {
			t.Fatalf("write %d (%v): the model refuses it: %v", pos, o, err)
		}
		if !equalIndex(want, w.after) {
			t.Fatalf("write %d (%v) is not its mutation applied to the version it replaced", pos, o)
		}
		versions = append(versions, w.after)
		applied[w.op] = append(applied[w.op], pos)
	}
	var twice, unknown, failed, effects, noops int
	for _, o := range ops {
		pos := applied[o.id]
		if len(pos) > 1 {
			twice++
			t.Errorf("%v applied %d times (writes %v), reported %q %v", o, len(pos), pos, o.outcome, o.err)
			continue
		}
		switch {
		case errors.Is(o.err, state.ErrOutcomeUnknown):
			unknown++
		case o.err != nil:
			failed++
			if len(pos) != 0 {
				t.Errorf("%v failed (%v) but was applied at write %d", o, o.err, pos[0])
			}
		case o.outcome == state.Unchanged || o.outcome == state.Absent:
			noops++
			if len(pos) != 0 {
				t.Errorf("%v reported %s but wrote at %d", o, o.outcome, pos[0])
				continue
			}
			held := false
			for v := o.start; v <= o.end && !held; v++ {
				e, ok := versions[v].Lookup(o.key)
				held = (o.delete && !ok) || (!o.delete && ok && e == o.target)
			}
			if !held {
				t.Errorf("%v reported %s, but no version in [%d, %d] held that", o, o.outcome, o.start, o.end)
			}
		default:
			effects++
			if len(pos) != 1 {
				t.Errorf("%v reported %s but was not applied", o, o.outcome)
				continue
			}
			p := pos[0]
			if p <= o.start || p > o.end {
				t.Errorf("%v applied at write %d, outside its interval (%d, %d]", o, p, o.start, o.end)
			}
			e, ok := versions[p-1].Lookup(o.key)
			var want state.Outcome
			switch {
			case o.delete:
				want = state.Deleted
			case !ok:
				want = state.Created
			case e != o.target:
				want = state.Updated
			}
			if o.outcome != want {
				t.Errorf("%v reported %s; at its write the key held %v (%v), so %q", o, o.outcome, e, ok, want)
			}
		}
	}
	t.Logf("%d effects, %d no-ops, %d failures, %d unknown outcomes, %d applied twice", effects, noops, failed, unknown, twice)
	if effects < len(ops)/4 {
		t.Errorf("only %d of %d operations took effect: the run exercised too little", effects, len(ops))
	}
}

func equalIndex(a, b *state.Index) bool { return string(a.Encode()) == string(b.Encode()) }

func cloneIndex(t *testing.T, ix *state.Index) *state.Index {
	c, err := state.DecodeIndex(ix.Encode())
	if err != nil {
		t.Fatal(err)
	}
	return c
}
