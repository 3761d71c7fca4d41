// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package faultstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/objstore/objstoretest"
)

// newInner returns a real, empty local bucket.
func newInner(t *testing.T) *local.Bucket {
	t.Helper()
	b := local.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := b.CreateBucket(t.Context()); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConformance proves that a wrapper without rules changes nothing.
func TestConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store { return faultstore.New(newInner(t)) })
}

func TestCountsWithoutFaults(t *testing.T) {
	ctx := t.Context()
	s := faultstore.New(newInner(t))
	etag, _ := s.Put(ctx, "index", []byte("v1"))
	_, _ = s.Get(ctx, "index", objstore.GetOptions{})
	_, _ = s.Get(ctx, "missing", objstore.GetOptions{})
	_, _ = s.Head(ctx, "index")
	_, _ = s.PutIfAbsent(ctx, "blob/1", []byte("x"))
	_, _ = s.PutIfAbsent(ctx, "blob/1", []byte("x")) // fails, still a request
	_, _ = s.PutIfMatch(ctx, "index", []byte("v2"), etag)
	_ = s.Delete(ctx, "blob/1", "")
	_, _ = s.List(ctx, "", objstore.ListOptions{})
	want := faultstore.Counts{Get: 2, Head: 1, PutIfAbsent: 2, PutIfMatch: 1, Put: 1, Delete: 1, List: 1}
	got := s.Counts()
	if got != want {
		t.Errorf("Counts = %+v, want %+v", got, want)
	}
	if got.Reads() != 4 || got.Writes() != 5 || got.Total() != 9 || got.Of(faultstore.OpPutIfAbsent) != 2 || got.Of("Nope") != 0 {
		t.Errorf("Reads/Writes/Total/Of = %d/%d/%d/%d, want 4/5/9/2", got.Reads(), got.Writes(), got.Total(), got.Of(faultstore.OpPutIfAbsent))
	}
	if inj := s.Injected(); inj != (faultstore.Counts{}) {
		t.Errorf("Injected = %+v without rules, want none", inj)
	}
	s.ResetCounts()
	if got := s.Counts(); got.Total() != 0 {
		t.Errorf("Counts after ResetCounts = %+v", got)
	}
}

func TestFailIsNotPerformed(t *testing.T) {
	ctx := t.Context()
	inner := newInner(t)
	s := faultstore.New(inner, faultstore.WithRules(faultstore.Rule{
		Action: faultstore.Fail,
		Ops:    faultstore.WriteOps(),
		Prefix: "state/",
		Err:    objstore.ErrPrecondition,
	}))
	_, err := s.Put(ctx, "state/index", []byte("x"))
	if !errors.Is(err, faultstore.ErrInjected) || !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("Put error = %v, want ErrInjected and ErrPrecondition", err)
	}
	if want := `Put "state/index": injected fault: precondition failed`; err == nil || err.Error() != want {
		t.Errorf("Put error = %v, want %q", err, want)
	}
	if _, err := inner.Head(ctx, "state/index"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("the failed write reached the inner store (Head error = %v)", err)
	}
	if _, err := s.Put(ctx, "other/key", []byte("x")); err != nil {
		t.Errorf("Put outside the prefix: %v", err)
	}
	if _, err := s.Get(ctx, "state/index", objstore.GetOptions{}); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Get, not a selected op, error = %v, want the inner ErrNotFound", err)
	}
	if inj := s.Injected(); inj != (faultstore.Counts{Put: 1}) {
		t.Errorf("Injected = %+v, want one Put", inj)
	}
}

func TestAmbiguousWriteLands(t *testing.T) {
	ctx := t.Context()
	inner := newInner(t)
	s := faultstore.New(inner, faultstore.WithRules(faultstore.Rule{
		Action: faultstore.Ambiguous, Ops: []faultstore.Op{faultstore.OpPutIfAbsent}, Limit: 1,
	}))
	etag, err := s.PutIfAbsent(ctx, "manifest", []byte("m1"))
	if !errors.Is(err, faultstore.ErrAmbiguous) || etag != "" {
		t.Fatalf("PutIfAbsent = %q, %v; want no ETag and ErrAmbiguous", etag, err)
	}
	obj, err := inner.Get(ctx, "manifest", objstore.GetOptions{})
	if err != nil || string(obj.Data) != "m1" {
		t.Fatalf("inner object = %q, %v; want the ambiguous write applied", obj.Data, err)
	}
	// The naive retry now meets its own earlier write.
	if _, err := s.PutIfAbsent(ctx, "manifest", []byte("m1")); !errors.Is(err, objstore.ErrPrecondition) {
		t.Errorf("retry error = %v, want ErrPrecondition", err)
	}
	// A failing inner call is reported as such, not as ambiguous.
	s.SetRules(faultstore.Rule{Action: faultstore.Ambiguous})
	if _, err := s.PutIfMatch(ctx, "manifest", []byte("m2"), `"stale"`); !errors.Is(err, objstore.ErrPrecondition) || errors.Is(err, faultstore.ErrAmbiguous) {
		t.Errorf("ambiguous PutIfMatch with a stale ETag error = %v, want only ErrPrecondition", err)
	}
}

// failures runs n Gets and records which ones were faulted.
func failures(t *testing.T, s *faultstore.Store, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		_, err := s.Get(t.Context(), "k", objstore.GetOptions{})
		out[i] = errors.Is(err, faultstore.ErrInjected)
	}
	return out
}

func TestProbabilityIsSeeded(t *testing.T) {
	inner := newInner(t)
	if _, err := inner.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	rule := faultstore.Rule{Action: faultstore.Fail, Probability: 0.3}
	run := func(seed uint64) []bool {
		return failures(t, faultstore.New(inner, faultstore.WithSeed(seed), faultstore.WithRules(rule)), 400)
	}
	a, b, c := run(42), run(42), run(43)
	if !slices.Equal(a, b) {
		t.Error("two runs with seed 42 faulted different calls")
	}
	if slices.Equal(a, c) {
		t.Error("seeds 42 and 43 faulted the same calls")
	}
	n := 0
	for _, f := range a {
		if f {
			n++
		}
	}
	if n < 80 || n > 160 {
		t.Errorf("%d of 400 calls faulted at probability 0.3", n)
	}
}

func TestSkipAndLimit(t *testing.T) {
	s := faultstore.New(newInner(t), faultstore.WithRules(faultstore.Rule{Action: faultstore.Fail, Skip: 2, Limit: 2}))
	got := failures(t, s, 6)
	if want := []bool{false, false, true, true, false, false}; !slices.Equal(got, want) {
		t.Errorf("faulted calls = %v, want %v", got, want)
	}
}

func TestDelay(t *testing.T) {
	var mu sync.Mutex
	var slept []time.Duration
	s := faultstore.New(newInner(t),
		faultstore.WithSleep(func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			slept = append(slept, d)
			return nil
		}),
		faultstore.WithRules(
			faultstore.Rule{Action: faultstore.Delay, Ops: []faultstore.Op{faultstore.OpPut}, Latency: time.Second},
			faultstore.Rule{Action: faultstore.Delay, Prefix: "slow/", Latency: 2 * time.Second},
		))
	if _, err := s.Put(t.Context(), "slow/k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), "fast/k", objstore.GetOptions{}); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatal(err)
	}
	if want := []time.Duration{3 * time.Second}; !slices.Equal(slept, want) {
		t.Errorf("slept %v, want %v", slept, want)
	}
}

func TestDelayHonoursContext(t *testing.T) {
	inner := newInner(t)
	s := faultstore.New(inner, faultstore.WithRules(faultstore.Rule{Action: faultstore.Delay, Latency: time.Hour}))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Put(ctx, "k", []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a cancelled context during an hour's delay: error = %v, want context.Canceled", err)
	}
	if _, err := inner.Head(t.Context(), "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("the cancelled write reached the inner store (Head error = %v)", err)
	}
}

func TestConcurrentCounting(t *testing.T) {
	s := faultstore.New(newInner(t), faultstore.WithRules(faultstore.Rule{Action: faultstore.Fail, Probability: 0.5}))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				_, _ = s.Head(t.Context(), "k")
			}
		})
	}
	wg.Wait()
	if got := s.Counts().Head; got != 800 {
		t.Errorf("Counts().Head = %d, want 800", got)
	}
	if inj := s.Injected().Head; inj == 0 || inj == 800 {
		t.Errorf("Injected().Head = %d of 800 at probability 0.5", inj)
	}
}

// TestStreamingCountsAsRequests checks that Open and Write count, and are
// faulted, as the request they are: Open a Get, Write a Put, PutIfAbsent
// or PutIfMatch by its condition. Metadata passes through.
func TestStreamingCountsAsRequests(t *testing.T) {
	ctx := t.Context()
	inner := newInner(t)
	s := faultstore.New(inner)
	md := map[string]string{"write-id": "abc"}
	etag, err := s.Write(ctx, "index", strings.NewReader("v1"), 2, objstore.PutOptions{IfAbsent: true, Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, "index", strings.NewReader("v2"), 2, objstore.PutOptions{IfMatch: etag}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(ctx, "other", strings.NewReader("x"), 1, objstore.PutOptions{Metadata: md}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(ctx, "other", objstore.GetOptions{Range: &objstore.Range{Offset: 0, Length: 1}})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if r.Info.Metadata["write-id"] != "abc" {
		t.Errorf("Open metadata = %v, want it passed through", r.Info.Metadata)
	}
	if got, want := s.Counts(), (faultstore.Counts{Get: 1, PutIfAbsent: 1, PutIfMatch: 1, Put: 1}); got != want {
		t.Errorf("Counts = %+v, want %+v", got, want)
	}

	s.SetRules(faultstore.Rule{Action: faultstore.Ambiguous, Ops: []faultstore.Op{faultstore.OpPutIfMatch}})
	cur, err := inner.Head(ctx, "index")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Write(ctx, "index", strings.NewReader("v3"), 2, objstore.PutOptions{IfMatch: cur.ETag, Metadata: md})
	if !errors.Is(err, faultstore.ErrAmbiguous) {
		t.Fatalf("faulted Write error = %v, want ErrAmbiguous", err)
	}
	obj, err := inner.Get(ctx, "index", objstore.GetOptions{})
	if err != nil || string(obj.Data) != "v3" || obj.Metadata["write-id"] != "abc" {
		t.Errorf("after an ambiguous Write the object is %q %v, %v; want v3 applied with its metadata", obj.Data, obj.Metadata, err)
	}
	s.SetRules(faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpGet}})
	if _, err := s.Open(ctx, "index", objstore.GetOptions{}); !errors.Is(err, faultstore.ErrInjected) {
		t.Errorf("faulted Open error = %v, want ErrInjected", err)
	}
}
