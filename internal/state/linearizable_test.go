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
	"os"
	"slices"
	"strconv"
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
	// meta is the write's object metadata: its write ID and chain.
	meta map[string]string
}

// fakeHistory sits beneath the fault injection and records every index
// write the store applied, whether or not its reply reached the caller,
// and which version of the index each read returned. Index reads and
// writes are serialized through it so that each write's pre-image and
// each read's version are exact.
type fakeHistory struct {
	objstore.Store
	mu     sync.Mutex
	writes []appliedWrite
	// reads[op] lists the versions (numbers of applied writes) the
	// operation's index reads returned, in order.
	reads map[int][]int
}

// Get records which version an index read returned.
func (h *fakeHistory) Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	if key != state.IndexPath {
		return h.Store.Get(ctx, key, opts)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	obj, err := h.Store.Get(ctx, key, opts)
	if err == nil || errors.Is(err, objstore.ErrNotFound) {
		op, _ := ctx.Value(opKey{}).(int)
		if h.reads == nil {
			h.reads = map[int][]int{}
		}
		h.reads[op] = append(h.reads[op], len(h.writes))
	}
	return obj, err
}

func (h *fakeHistory) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.writes)
}

func (h *fakeHistory) record(ctx context.Context, key string, data []byte, meta map[string]string, write func() (string, error)) (string, error) {
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
		h.writes = append(h.writes, appliedWrite{op: op, before: before, after: after, meta: meta})
	}
	return etag, err
}

func (h *fakeHistory) PutIfAbsent(ctx context.Context, key string, data []byte) (string, error) {
	return h.record(ctx, key, data, nil, func() (string, error) { return h.Store.PutIfAbsent(ctx, key, data) })
}

func (h *fakeHistory) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	return h.record(ctx, key, data, nil, func() (string, error) { return h.Store.PutIfMatch(ctx, key, data, etag) })
}

func (h *fakeHistory) Put(ctx context.Context, key string, data []byte) (string, error) {
	return h.record(ctx, key, data, nil, func() (string, error) { return h.Store.Put(ctx, key, data) })
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
	return h.record(ctx, key, data, opts.Metadata, func() (string, error) {
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
	lostReply  bool
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

// lostReplyOps is the size of the lost-reply runs: PODMIN_LOSTREPLY_OPS
// operations in total when set (the long run: 10000 or more), otherwise a
// size that keeps each store's run to a few seconds.
func lostReplyOps(t *testing.T, def int) int {
	v := os.Getenv("PODMIN_LOSTREPLY_OPS")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 100 {
		t.Fatalf("PODMIN_LOSTREPLY_OPS=%q: want a number of operations, at least 100", v)
	}
	return n
}

func TestLostRepliesAreLinearizableLocal(t *testing.T) {
	runLostReplies(t, newLocal(t), lostReplyOps(t, 600))
}

// Writers of the lost-reply runs: writers on two shared keys, and
// returners that deploy one entry and delete it again, over and over, so
// the index keeps returning to earlier bytes (and earlier ETags).
const (
	lostReplyWriters   = 6
	lostReplyReturners = 3
)

// runLostReplies runs writers that deploy and delete the same few keys at
// once, and returners that deploy and delete their own, while half of all
// index-write replies are dropped after the write was applied, some
// writes fail before reaching the store (some of those provably, some
// not), and some payload writes fail. It checks every reported outcome
// against the store's own serial history of applied writes:
//
//   - each applied write is exactly its operation's mutation applied to the
//     version it replaced (no lost update, nothing else changed);
//   - no operation is applied twice;
//   - created/updated/deleted was applied exactly once, against a pre-image
//     that makes that outcome true; unchanged/absent wrote nothing and the
//     key held the target at some version during the operation;
//   - a failure other than ErrOutcomeUnknown was not applied;
//   - every unknown outcome, and every success settled by the index holding
//     the effect after a lost reply, is justified by the history (see
//     justifyUnresolved).
//
// Together these place every operation at one point of one serial order.
func runLostReplies(t *testing.T, b objstore.Store, total int) {
	ctx := context.Background()
	hist := &fakeHistory{Store: b}
	fs := faultstore.New(hist, faultstore.WithSeed(11), faultstore.WithRules(
		faultstore.Rule{Action: faultstore.Fail, Ops: indexWrites, Prefix: state.IndexPath, Probability: 0.03, Err: objstore.ErrNotApplied},
		faultstore.Rule{Action: faultstore.Fail, Ops: indexWrites, Prefix: state.IndexPath, Probability: 0.03},
		faultstore.Rule{Action: faultstore.Ambiguous, Ops: indexWrites, Prefix: state.IndexPath, Probability: 0.5},
		faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpPutIfAbsent}, Prefix: state.NodeGroupsPrefix, Probability: 0.05},
	))
	// A lost reply surfaces only after a while (a timeout, a reset), and
	// other writers act meanwhile.
	store := &lateLoss{Store: fs, max: 3 * time.Millisecond}
	keys := []state.Key{{NodeGroup: "workers", Name: "web"}, {NodeGroup: "workers", Name: "api"}}
	goroutines := lostReplyWriters + lostReplyReturners
	perGoroutine := (total + goroutines - 1) / goroutines
	ops := make([][]linOp, goroutines)
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Real, short backoff: other writers act inside the window
			// between a lost reply and its resolution.
			c := state.NewCommitter(store, state.CommitOptions{MaxAttempts: 64, BaseDelay: time.Millisecond, MaxDelay: 8 * time.Millisecond})
			rng := rand.New(rand.NewPCG(uint64(w), 5))
			returner := w >= lostReplyWriters
			back := state.Key{NodeGroup: "workers", Name: "back"}
			for i := range perGoroutine {
				id := w*perGoroutine + i + 1
				octx := context.WithValue(ctx, opKey{}, id)
				op := linOp{id: id, key: keys[rng.IntN(len(keys))], start: hist.len()}
				var d state.Deployment
				switch {
				case returner:
					// Deploy X, then delete X, all returners on one key:
					// each deploy and the next delete (often another
					// returner's) return the index to the bytes it had,
					// unless someone wrote in between.
					op.key, op.delete = back, i%2 == 1
					d = deployment(back.NodeGroup, back.Name, "default", "x:v1", "")
				case rng.IntN(4) == 0:
					op.delete = true
				default:
					// Few distinct entries, so writers keep restoring
					// each other's earlier values.
					svc := []string{"", "front"}[rng.IntN(2)]
					if svc != "" {
						svc += "-" + op.key.Name
					}
					d = deployment(op.key.NodeGroup, op.key.Name, "default", fmt.Sprintf("x:v%d", rng.IntN(2)), svc)
				}
				if op.delete {
					var res state.DeleteResult
					res, op.err = c.Delete(octx, op.key)
					op.outcome, op.lostReply = res.Outcome, res.LostReply
				} else {
					var res state.DeployResult
					res, op.err = c.Deploy(octx, d)
					op.outcome, op.target, op.lostReply = res.Outcome, res.Entry, res.LostReply
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
	checkLinearizable(t, hist, all)
	t.Logf("%d operations, %d applied index writes, injected %+v", len(all), len(hist.writes), fs.Injected())
}

// lateLoss delays the error of an index write whose reply was lost by up
// to max, as the timeout or reset that reports a lost reply takes a while;
// the write itself has landed by then.
type lateLoss struct {
	objstore.Store
	max time.Duration
	mu  sync.Mutex
	rng *rand.Rand
}

func (l *lateLoss) delay(err error) error {
	if errors.Is(err, faultstore.ErrAmbiguous) {
		l.mu.Lock()
		if l.rng == nil {
			l.rng = rand.New(rand.NewPCG(3, 3))
		}
		d := time.Duration(l.rng.Int64N(int64(l.max)))
		l.mu.Unlock()
		time.Sleep(d)
	}
	return err
}

func (l *lateLoss) PutIfAbsent(ctx context.Context, key string, data []byte) (string, error) {
	etag, err := l.Store.PutIfAbsent(ctx, key, data)
	return etag, l.delay(err)
}

func (l *lateLoss) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	etag, err := l.Store.PutIfMatch(ctx, key, data, etag)
	return etag, l.delay(err)
}

// Open streams reads from the inner store.
func (l *lateLoss) Open(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	return objstore.OpenObject(ctx, l.Store, key, opts)
}

// Write passes index writes with their metadata through.
func (l *lateLoss) Write(ctx context.Context, key string, body io.Reader, size int64, opts objstore.PutOptions) (string, error) {
	etag, err := objstore.WriteObject(ctx, l.Store, key, body, size, opts)
	return etag, l.delay(err)
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

// replay is the serial history of the index: versions[v] is the index
// after v applied writes.
type replay struct {
	versions []*state.Index
	writes   []appliedWrite
	// firstSeen maps an index's bytes to the first version that had them.
	firstSeen map[string]int
	// content[v] is the bytes of versions[v].
	content []string
}

// chain is the write IDs version v (v >= 1) records, newest first.
func (r *replay) chain(v int) []string {
	m := r.writes[v-1].meta
	if m[state.WriteIDMeta] == "" {
		return nil
	}
	out := []string{m[state.WriteIDMeta]}
	if c := m[state.WriteChainMeta]; c != "" {
		out = append(out, strings.Split(c, ",")...)
	}
	return out
}

// returned reports whether, among versions from..to-1 (each replaced by a
// later write up to version to), one had the same bytes as a version
// before from: the content-equal return that lets a writer who read that
// earlier version land a stale write that records its old chain of IDs.
func (r *replay) returned(from, to int) bool {
	for v := from; v < to; v++ {
		if r.firstSeen[r.content[v]] < from {
			return true
		}
	}
	return false
}

// unresolvedKind classifies an operation whose write could not be proven
// to have landed or not.
type unresolvedKind int

const (
	// landedErased: its write landed, and a content-equal return (or more
	// writes than a chain records) followed before its re-read.
	landedErased unresolvedKind = iota
	// notLandedChanged: its write did not land, and another write landed
	// between its read of the base and its re-read.
	notLandedChanged
)

// justifyUnresolved checks that an unresolved outcome (unknown, or
// settled by the effect being present) was forced by the history, and
// says why. The re-read is the operation's last index read and the base
// its read before that (the version its last write was conditional on).
//
//   - Its write landed at version p: the re-read's chain lacks its ID, which
//     takes a stale write landing on a version whose bytes equal a version
//     from before p (a content-equal return between p and the re-read), or
//     more writes than a chain records.
//   - Its write did not land: the re-read is not the base. A version that is
//     not the base carries another writer's ID, and what its chain says
//     about older history could have been written by a stale writer over a
//     content-equal return that erased this write: the same observation
//     arises in a history where the write landed, so no proof exists.
func justifyUnresolved(r *replay, reads []int, applied []int) (unresolvedKind, error) {
	if len(reads) < 2 {
		return 0, fmt.Errorf("only %d index reads: no write was resolved", len(reads))
	}
	base, reread := reads[len(reads)-2], reads[len(reads)-1]
	if len(applied) == 1 {
		p := applied[0]
		if reread-p >= 95 || r.returned(p, reread) {
			return landedErased, nil
		}
		return 0, fmt.Errorf("its write landed as version %d and versions %d..%d show no content-equal return", p, p, reread)
	}
	if reread > base {
		return notLandedChanged, nil
	}
	return 0, fmt.Errorf("its write did not land and its re-read returned its base, version %d, itself", base)
}

func checkLinearizable(t *testing.T, hist *fakeHistory, ops []linOp) {
	t.Helper()
	byID := map[int]linOp{}
	for _, o := range ops {
		byID[o.id] = o
	}
	r := &replay{versions: []*state.Index{state.NewIndex()}, writes: hist.writes, firstSeen: map[string]int{}}
	r.content = []string{string(r.versions[0].Encode())}
	r.firstSeen[r.content[0]] = 0
	applied := map[int][]int{} // op → positions of its writes (1-based)
	for i, w := range hist.writes {
		pos := i + 1
		o, ok := byID[w.op]
		if !ok {
			t.Fatalf("write %d belongs to no operation", pos)
		}
		prev := r.versions[len(r.versions)-1]
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
		r.versions = append(r.versions, w.after)
		c := entriesOnly(w.after)
		r.content = append(r.content, c)
		if _, ok := r.firstSeen[c]; !ok {
			r.firstSeen[c] = pos
		}
		applied[w.op] = append(applied[w.op], pos)
	}
	holds := func(o linOp, v int) bool {
		e, ok := r.versions[v].Lookup(o.key)
		return (o.delete && !ok) || (!o.delete && ok && e == o.target)
	}
	var twice, unknown, failed, effects, noops, settled, erased, changed, oldRuleTwice int
	unresolved := func(o linOp) bool {
		reads := hist.reads[o.id]
		kind, err := justifyUnresolved(r, reads, applied[o.id])
		if err != nil {
			t.Errorf("%v reported %q (%v) without a cause in the history: %v", o, o.outcome, o.err, err)
			return false
		}
		if kind == landedErased {
			erased++
			// Would reading "the base's ID in the chain without mine" as
			// "did not land" have applied it again?
			base, reread := reads[len(reads)-2], reads[len(reads)-1]
			if base > 0 && reread > 0 {
				ch := r.chain(reread)
				if bc := r.chain(base); len(bc) > 0 && slices.Contains(ch, bc[0]) {
					oldRuleTwice++
				}
			}
		} else {
			changed++
		}
		return true
	}
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
			unresolved(o)
		case o.err != nil:
			failed++
			if len(pos) != 0 {
				t.Errorf("%v failed (%v) but was applied at write %d", o, o.err, pos[0])
			}
		case o.lostReply:
			settled++
			if o.outcome != state.Unchanged && o.outcome != state.Absent {
				t.Errorf("%v settled after a lost reply with outcome %s", o, o.outcome)
			}
			if unresolved(o) {
				if reads := hist.reads[o.id]; !holds(o, reads[len(reads)-1]) {
					t.Errorf("%v settled after a lost reply, but its re-read (version %d) does not hold its effect", o, reads[len(reads)-1])
				}
			}
		case o.outcome == state.Unchanged || o.outcome == state.Absent:
			noops++
			if len(pos) != 0 {
				t.Errorf("%v reported %s but wrote at %d", o, o.outcome, pos[0])
				continue
			}
			held := false
			for v := o.start; v <= o.end && !held; v++ {
				held = holds(o, v)
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
			e, ok := r.versions[p-1].Lookup(o.key)
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
	t.Logf("%d operations: %d effects, %d no-ops, %d settled after a lost reply, %d unknown outcomes, %d failures, %d applied twice",
		len(ops), effects, noops, settled, unknown, failed, twice)
	t.Logf("unresolved writes: %d landed then erased by a content-equal return (%d of them the previous rule would have applied twice), %d not landed with the index changed since",
		erased, oldRuleTwice, changed)
	if effects < len(ops)/4 {
		t.Errorf("only %d of %d operations took effect: the run exercised too little", effects, len(ops))
	}
}

// equalIndex compares the entries of two indexes. The revisions a deploy
// records carry its write ID and time, which the model cannot know; what
// the protocol must keep linearizable is the desired state, the entries.
func equalIndex(a, b *state.Index) bool { return entriesOnly(a) == entriesOnly(b) }

// entriesOnly is the canonical form of ix's entries without their
// revisions.
func entriesOnly(ix *state.Index) string {
	out := state.NewIndex()
	for _, it := range ix.Items() {
		if _, _, err := out.Set(it.Key, it.Entry); err != nil {
			panic(err) // entries of a valid index are valid
		}
	}
	return string(out.Encode())
}

func cloneIndex(t *testing.T, ix *state.Index) *state.Index {
	c, err := state.DecodeIndex(ix.Encode())
	if err != nil {
		t.Fatal(err)
	}
	return c
}
