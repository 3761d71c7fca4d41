// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/objstore/local"
)

func newBucket(t testing.TB) *local.Bucket {
	t.Helper()
	b := local.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := b.CreateBucket(t.Context()); err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	web    = coordinator.ServiceID{Namespace: "product", Name: "web"}
	db     = coordinator.ServiceID{Namespace: "product", Name: "database"}
	apiSvc = coordinator.ServiceID{Namespace: "api", Name: "web"}
)

func ep(s coordinator.ServiceID, addr string) coordinator.Endpoint {
	return coordinator.Endpoint{Service: s, Addr: netip.MustParseAddr(addr)}
}

func sampleReports() []coordinator.NodeReport {
	return []coordinator.NodeReport{
		{NodeID: "n1", Endpoints: []coordinator.Endpoint{ep(web, "2001:db8:1:0:1::9"), ep(web, "2001:db8:1:0:1::2"), ep(db, "2001:db8:1:0:1::3")}},
		{NodeID: "n2", Endpoints: []coordinator.Endpoint{ep(web, "2001:db8:1:0:2::1"), ep(coordinator.ServiceID{Namespace: "x", Name: "gone"}, "2001:db8:1:0:2::7")}},
	}
}

func TestBuildSnapshotIsDeterministic(t *testing.T) {
	services := []coordinator.ServiceID{web, db, apiSvc}
	want, err := coordinator.Marshal(coordinator.BuildSnapshot(services, sampleReports()))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		s := append([]coordinator.ServiceID(nil), services...)
		rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		r := sampleReports()
		rng.Shuffle(len(r), func(i, j int) { r[i], r[j] = r[j], r[i] })
		for _, n := range r {
			rng.Shuffle(len(n.Endpoints), func(i, j int) { n.Endpoints[i], n.Endpoints[j] = n.Endpoints[j], n.Endpoints[i] })
		}
		got, _ := coordinator.Marshal(coordinator.BuildSnapshot(s, r))
		if !bytes.Equal(got, want) {
			t.Fatal("the same Services and reports in another order encode differently")
		}
	}
	snap := coordinator.BuildSnapshot(services, sampleReports())
	var names []string
	for _, s := range snap.Services {
		names = append(names, s.Namespace+"/"+s.Name)
		for _, e := range s.Endpoints {
			names = append(names, "  "+e.Address+"@"+e.NodeId)
		}
	}
	wantNames := []string{"api/web", "product/database", "  2001:db8:1:0:1::3@n1", "product/web",
		"  2001:db8:1:0:1::2@n1", "  2001:db8:1:0:1::9@n1", "  2001:db8:1:0:2::1@n2"}
	if len(names) != len(wantNames) {
		t.Fatalf("snapshot = %q, want %q", names, wantNames)
	}
	for i := range names {
		if names[i] != wantNames[i] {
			t.Fatalf("snapshot = %q, want %q (endpoints of unknown Services dropped)", names, wantNames)
		}
	}
}

func read(t *testing.T, s objstore.Store) *pb.ServiceSnapshot {
	t.Helper()
	obj, err := s.Get(t.Context(), coordinator.SnapshotKey, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := coordinator.Unmarshal(obj.Data)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestSupersededLeaderWriteIsRefused runs two leaderships one after the
// other: the earlier leader's later write must be refused and leave the
// later leader's snapshot in place.
func TestSupersededLeaderWriteIsRefused(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t)
	old := coordinator.NewWriter(b, "n1")
	if _, err := old.Begin(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s1 := coordinator.BuildSnapshot([]coordinator.ServiceID{web}, sampleReports())
	if w, err := old.Write(ctx, s1); err != nil || w.Generation != 1 || w.Revision != 1 {
		t.Fatalf("first write = %v, %v; want generation 1 revision 1", w, err)
	}
	s2 := coordinator.BuildSnapshot([]coordinator.ServiceID{web, db}, sampleReports())
	if w, err := old.Write(ctx, s2); err != nil || w.Revision != 2 {
		t.Fatalf("second write = %v, %v; want revision 2", w, err)
	}
	// An unchanged set is not written again.
	if w, _ := old.Write(ctx, s2); w.Revision != 2 {
		t.Errorf("unchanged write made revision %d", w.Revision)
	}

	next := coordinator.NewWriter(b, "n2")
	prev, err := next.Begin(ctx, 2)
	if err != nil || prev.Generation != 1 || next.Generation() != 2 {
		t.Fatalf("Begin = %v, %v, generation %d; want to find generation 1 and claim 2", prev, err, next.Generation())
	}
	if _, err := next.Write(ctx, s1); err != nil {
		t.Fatal(err)
	}
	_, err = old.Write(ctx, coordinator.BuildSnapshot([]coordinator.ServiceID{apiSvc}, nil))
	if !errors.Is(err, coordinator.ErrSuperseded) {
		t.Fatalf("superseded write error = %v, want ErrSuperseded", err)
	}
	if got := read(t, b); got.Generation != 2 || got.LeaderId != "n2" || len(got.Services) != 1 || got.Services[0].Name != "web" {
		t.Errorf("stored = %v, want n2's generation 2", got)
	}
	// Fenced for good: no further attempt reaches the store.
	if _, err := old.Write(ctx, s2); !errors.Is(err, coordinator.ErrSuperseded) {
		t.Errorf("second superseded write error = %v", err)
	}
}

// TestStaleWriteBetweenBeginAndWrite lets the old leader's in-flight write
// land after the new leader's Begin: the new leader writes over it and
// the old leader is fenced afterwards.
func TestStaleWriteBetweenBeginAndWrite(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t)
	old := coordinator.NewWriter(b, "n1")
	old.Begin(ctx, 1)
	s := coordinator.BuildSnapshot([]coordinator.ServiceID{web}, nil)
	old.Write(ctx, s)
	next := coordinator.NewWriter(b, "n2")
	next.Begin(ctx, 2)
	if _, err := old.Write(ctx, coordinator.BuildSnapshot([]coordinator.ServiceID{db}, nil)); err != nil {
		t.Fatalf("the old leader's write before any fence: %v", err)
	}
	if w, err := next.Write(ctx, s); err != nil || w.Generation != 2 {
		t.Fatalf("new leader write = %v, %v", w, err)
	}
	if _, err := old.Write(ctx, s); !errors.Is(err, coordinator.ErrSuperseded) {
		t.Fatalf("old leader error = %v, want ErrSuperseded", err)
	}
}

// TestWriterUnderAmbiguousWrites loses every other reply: each write must
// still be recognised as landed and revisions must stay consecutive.
func TestWriterUnderAmbiguousWrites(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t)
	fs := faultstore.New(b, faultstore.WithRules(faultstore.Rule{Action: faultstore.Ambiguous, Ops: faultstore.WriteOps(), Probability: 0.5}))
	w := coordinator.NewWriter(fs, "n1")
	if _, err := w.Begin(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		svc := coordinator.ServiceID{Namespace: "ns", Name: string(rune('a' + i))}
		got, err := w.Write(ctx, coordinator.BuildSnapshot([]coordinator.ServiceID{svc}, nil))
		if err != nil || got.Revision != uint64(i+1) {
			t.Fatalf("write %d = %v, %v", i, got, err)
		}
		if stored := read(t, b); stored.Revision != uint64(i+1) {
			t.Fatalf("stored revision %d after write %d", stored.Revision, i)
		}
	}
	if fs.Injected().Writes() == 0 {
		t.Fatal("no ambiguous write was injected")
	}
}

func TestCacheKeepsBackendsForTheLeaseWindow(t *testing.T) {
	c := coordinator.NewCache(coordinator.Retention)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if c.View(t0) != nil {
		t.Fatal("empty cache has a view")
	}
	s := coordinator.BuildSnapshot([]coordinator.ServiceID{web, db}, sampleReports())
	s.Generation, s.Revision = 3, 7
	if !c.Update(s, t0) {
		t.Fatal("first snapshot not taken")
	}
	older := coordinator.BuildSnapshot([]coordinator.ServiceID{apiSvc}, nil)
	older.Generation, older.Revision = 3, 6
	if c.Update(older, t0.Add(time.Second)) {
		t.Error("an older revision replaced the snapshot")
	}
	// Partitioned: the backends last for the lease window...
	if v := c.View(t0.Add(time.Second + coordinator.Retention)); len(v.Services[1].Endpoints) != 3 {
		t.Errorf("backends gone within the lease window: %v", v)
	}
	// ...and then only the DNS identities remain.
	v := c.View(t0.Add(time.Second + coordinator.Retention + time.Millisecond))
	if len(v.Services) != 2 || v.Services[0].Name != "database" || len(v.Services[0].Endpoints)+len(v.Services[1].Endpoints) != 0 {
		t.Errorf("view after the window = %v, want both Services without backends", v)
	}
	c.Confirm(t0.Add(time.Minute))
	if v := c.View(t0.Add(time.Minute)); len(v.Services[1].Endpoints) != 3 {
		t.Error("a leader heard again does not restore the backends")
	}
}

func TestLoadDurableDropsBackends(t *testing.T) {
	ctx := t.Context()
	b := newBucket(t)
	if s, err := coordinator.LoadDurable(ctx, b); err != nil || len(s.Services) != 0 {
		t.Fatalf("LoadDurable on an empty bucket = %v, %v", s, err)
	}
	w := coordinator.NewWriter(b, "n1")
	w.Begin(ctx, 1)
	w.Write(ctx, coordinator.BuildSnapshot([]coordinator.ServiceID{web}, sampleReports()))
	s, err := coordinator.LoadDurable(ctx, b)
	if err != nil || len(s.Services) != 1 || len(s.Services[0].Endpoints) != 0 {
		t.Fatalf("LoadDurable = %v, %v; want web without backends", s, err)
	}
	c := coordinator.NewCache(coordinator.Retention)
	c.Restore(s)
	if v := c.View(time.Now()); len(v.Services) != 1 || len(v.Services[0].Endpoints) != 0 {
		t.Errorf("restored view = %v", v)
	}
}

// BenchmarkSnapshotWrite measures one fenced snapshot write of 100
// Services with 10 endpoints each to a local bucket.
func BenchmarkSnapshotWrite(b *testing.B) { benchSnapshotWrite(b, newBucket(b)) }

func benchSnapshotWrite(b *testing.B, bucket objstore.Store) {
	w := coordinator.NewWriter(bucket, "n1")
	if _, err := w.Begin(b.Context(), 1); err != nil {
		b.Fatal(err)
	}
	var services []coordinator.ServiceID
	var eps []coordinator.Endpoint
	for i := range 100 {
		s := coordinator.ServiceID{Namespace: "ns", Name: "svc" + string(rune('a'+i%26)) + string(rune('a'+i/26))}
		services = append(services, s)
		for j := range 10 {
			eps = append(eps, coordinator.Endpoint{Service: s, Addr: netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i), 15: byte(j)})})
		}
	}
	b.ResetTimer()
	for i := range b.N {
		// A different node ID each time makes every snapshot new.
		snap := coordinator.BuildSnapshot(services, []coordinator.NodeReport{{NodeID: "n" + string(rune('a'+i%26)), Endpoints: eps}})
		if _, err := w.Write(b.Context(), snap); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzUnmarshal feeds arbitrary bytes (a corrupt dns/services.pb) to the
// decoder: it must not panic, and what it accepts must survive a
// deterministic round trip.
func FuzzUnmarshal(f *testing.F) {
	good, _ := coordinator.Marshal(coordinator.BuildSnapshot([]coordinator.ServiceID{web, db}, sampleReports()))
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{0x08, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := coordinator.Unmarshal(data)
		if err != nil {
			return
		}
		again, err := coordinator.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := coordinator.Unmarshal(again)
		if err != nil {
			t.Fatal(err)
		}
		third, _ := coordinator.Marshal(s2)
		if !bytes.Equal(again, third) {
			t.Fatal("deterministic encoding changed on a round trip")
		}
		_ = coordinator.WithoutBackends(s)
	})
}
