// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"errors"
	"testing"
	"time"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// TestTwoWritersClaimingOneGeneration: two leaderships that claim the same
// term and generation (both Began before either wrote) cannot both write.
// The second finds the same generation of another leader and stops; it
// never writes over the first.
func TestTwoWritersClaimingOneGeneration(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t)
	first, second := coordinator.NewWriter(b, "n1"), coordinator.NewWriter(b, "n2")
	for _, w := range []*coordinator.Writer{first, second} {
		if _, err := w.Begin(ctx, 3); err != nil {
			t.Fatal(err)
		}
	}
	if first.Generation() != second.Generation() {
		t.Fatalf("generations %d and %d, want one claimed twice", first.Generation(), second.Generation())
	}
	if _, err := first.Write(ctx, coordinator.BuildSnapshot([]coordinator.ServiceID{web}, nil)); err != nil {
		t.Fatal(err)
	}
	_, err := second.Write(ctx, coordinator.BuildSnapshot([]coordinator.ServiceID{db}, nil))
	if !errors.Is(err, coordinator.ErrSuperseded) {
		t.Fatalf("the second writer of generation %d: err %v, want ErrSuperseded", second.Generation(), err)
	}
	if got := read(t, b); got.LeaderId != "n1" || got.Term != 3 || len(got.Services) != 1 || got.Services[0].Name != "web" {
		t.Fatalf("stored = %v, want n1's snapshot", got)
	}
	// The first goes on; the second stays fenced.
	if w, err := first.Write(ctx, coordinator.BuildSnapshot([]coordinator.ServiceID{web, db}, nil)); err != nil || w.Revision != 2 {
		t.Fatalf("the first writer's next write = %v, %v", w, err)
	}
	if _, err := second.Write(ctx, coordinator.BuildSnapshot([]coordinator.ServiceID{db}, nil)); !errors.Is(err, coordinator.ErrSuperseded) {
		t.Fatalf("the fenced writer wrote: %v", err)
	}
}

// A later term outranks any generation: a leader whose term is below the
// stored one is fenced even though its generation is higher, and a new
// leadership whose term is not above the stored one must not begin.
func TestTermOutranksGeneration(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t)
	old := coordinator.NewWriter(b, "n1")
	old.Begin(ctx, 4)
	for i := range 5 { // push the generation's revisions up
		if _, err := old.Write(ctx, coordinator.BuildSnapshot([]coordinator.ServiceID{{Namespace: "ns", Name: string(rune('a' + i))}}, nil)); err != nil {
			t.Fatal(err)
		}
	}
	// A stored snapshot of generation 9 but term 5 (the lease object was
	// deleted and the snapshot rewritten).
	data, _ := coordinator.Marshal(&pb.ServiceSnapshot{Term: 5, Generation: 1, Revision: 1, LeaderId: "n2"})
	if _, err := b.Put(ctx, coordinator.SnapshotKey, data); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Write(ctx, coordinator.BuildSnapshot([]coordinator.ServiceID{web}, nil)); !errors.Is(err, coordinator.ErrSuperseded) {
		t.Fatalf("a term-4 writer over a term-5 snapshot: %v, want ErrSuperseded", err)
	}
	var stale *coordinator.StaleTermError
	if _, err := coordinator.NewWriter(b, "n3").Begin(ctx, 5); !errors.As(err, &stale) || stale.Stored != 5 {
		t.Fatalf("Begin at the stored term: %v, want StaleTermError", err)
	}
	next := coordinator.NewWriter(b, "n3")
	if _, err := next.Begin(ctx, 6); err != nil || next.Generation() != 2 {
		t.Fatalf("Begin above the stored term: %v, generation %d", err, next.Generation())
	}
}

// Agents order snapshots by term first: a new leadership that restarted
// its generations (its Begin found the stored snapshot corrupt or gone) is
// newer than what a node remembers; and the snapshot of the leadership the
// lease names is adopted even when a node remembers a higher term.
func TestCacheOrdersByTermAndAdoptsTheLeaseHolder(t *testing.T) {
	c := coordinator.NewCache(coordinator.Retention)
	now := time.Now()
	snap := func(term, gen, rev uint64, leader string, svc ...coordinator.ServiceID) *pb.ServiceSnapshot {
		s := coordinator.BuildSnapshot(svc, nil)
		s.Term, s.Generation, s.Revision, s.LeaderId = term, gen, rev, leader
		return s
	}
	if !c.Update(snap(2, 7, 9, "n1", web), now) {
		t.Fatal("first snapshot not taken")
	}
	if !c.Update(snap(3, 1, 1, "n2", web, db), now) {
		t.Fatal("a newer term with generation 1 was ignored")
	}
	if c.Update(snap(2, 9, 9, "n1", web), now) {
		t.Fatal("an older term with a higher generation replaced the snapshot")
	}
	// The lease history was reset: the lease names n3 with term 1.
	if !c.Adopt(snap(1, 1, 1, "n3", web, db, apiSvc), now) {
		t.Fatal("the lease holder's snapshot was not adopted over a remembered higher term")
	}
	if c.Adopt(snap(1, 1, 0, "n3", web), now) {
		t.Fatal("an older revision of the adopted leadership replaced it")
	}
	if v := c.View(now); len(v.Services) != 3 || v.Term != 1 || v.LeaderId != "n3" {
		t.Fatalf("view = %v", v)
	}
	// A restored snapshot (identities only) gives way to the leader's
	// snapshot of the very same position, which carries the backends.
	r := coordinator.NewCache(coordinator.Retention)
	full := coordinator.BuildSnapshot([]coordinator.ServiceID{web}, sampleReports())
	full.Term, full.Generation, full.Revision = 4, 2, 3
	r.Restore(coordinator.WithoutBackends(full))
	if !r.Update(full, now) || len(r.View(now).Services[0].Endpoints) != 3 {
		t.Fatalf("the restored snapshot kept its place: %v", r.View(now))
	}
}

// Verify finds a deleted, a corrupt and an overwritten snapshot, and the
// next Write restores this leadership's one even though its Services did
// not change; a later leadership's snapshot fences it.
func TestVerifyRestoresTheStoredSnapshot(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t)
	w := coordinator.NewWriter(b, "n1")
	w.Begin(ctx, 2)
	s := coordinator.BuildSnapshot([]coordinator.ServiceID{web}, nil)
	if _, err := w.Write(ctx, s); err != nil {
		t.Fatal(err)
	}
	if found, err := w.Verify(ctx); err != nil || found != "" {
		t.Fatalf("Verify of an intact snapshot = %q, %v", found, err)
	}
	older, _ := coordinator.Marshal(&pb.ServiceSnapshot{Term: 1, Generation: 5, Revision: 1, LeaderId: "n0"})
	for name, damage := range map[string]func() error{
		"it was deleted": func() error { return b.Delete(ctx, coordinator.SnapshotKey, "") },
		"it is corrupt": func() error {
			_, err := b.Put(ctx, coordinator.SnapshotKey, []byte("\xff\xfegarbage"))
			return err
		},
		"an earlier write": func() error { _, err := b.Put(ctx, coordinator.SnapshotKey, older); return err },
	} {
		if err := damage(); err != nil {
			t.Fatal(err)
		}
		found, err := w.Verify(ctx)
		if err != nil || len(found) < len(name) || found[:len(name)] != name {
			t.Fatalf("Verify after %s = %q, %v", name, found, err)
		}
		if _, err := w.Write(ctx, s); err != nil {
			t.Fatal(err)
		}
		if got := read(t, b); got.LeaderId != "n1" || got.Term != 2 || len(got.Services) != 1 {
			t.Fatalf("after %s the stored snapshot is %v", name, got)
		}
	}
	later, _ := coordinator.Marshal(&pb.ServiceSnapshot{Term: 3, Generation: 1, Revision: 1, LeaderId: "n2"})
	if _, err := b.Put(ctx, coordinator.SnapshotKey, later); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Verify(ctx); !errors.Is(err, coordinator.ErrSuperseded) {
		t.Fatalf("Verify over a later term: %v, want ErrSuperseded", err)
	}
	if _, err := w.Write(ctx, s); !errors.Is(err, coordinator.ErrSuperseded) {
		t.Fatalf("Write after being fenced: %v", err)
	}
}

// The index cache reads conditionally, and an index that vanishes after
// one was read is an error, not a cluster without Services.
func TestIndexCacheIsConditionalAndNeverEmptiesOnAVanishedIndex(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t)
	counted := &countingStore{Store: b}
	c := coordinator.NewIndexCache(counted)
	if ix, etag, err := c.Read(ctx); err != nil || ix.Len() != 0 || etag != "" {
		t.Fatalf("no index yet: %v, %q, %v", ix, etag, err)
	}
	deploy(t, b, "web", "product", true)
	ix, etag, err := c.Read(ctx)
	if err != nil || ix.Len() != 1 {
		t.Fatalf("Read = %v, %v", ix, err)
	}
	counted.reset()
	for range 5 {
		if again, e, err := c.Read(ctx); err != nil || again != ix || e != etag {
			t.Fatalf("unchanged Read = %v, %q, %v", again, e, err)
		}
	}
	if st := counted.stats(); st.gets != 5 || st.notModified != 5 || st.bytesIn != 0 {
		t.Fatalf("5 unchanged reads made %+v, want 5 conditional GETs answered 304", st)
	}
	if err := b.Delete(ctx, state.IndexPath, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Read(ctx); err == nil {
		t.Fatal("a vanished index read as a cluster without Services")
	}
	services := coordinator.IndexServices(b)
	if _, err := services(ctx); err != nil {
		t.Fatal(err) // a fresh reader has never seen it: empty
	}
	deploy(t, b, "web", "product", true)
	if got, err := services(ctx); err != nil || len(got) != 1 {
		t.Fatalf("Services = %v, %v", got, err)
	}
	if err := b.Delete(ctx, state.IndexPath, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := services(ctx); err == nil {
		t.Fatal("IndexServices read a vanished index as no Services")
	}
}

// keep the objstore import for countingStore's signature users.
var _ objstore.Store = (*countingStore)(nil)
