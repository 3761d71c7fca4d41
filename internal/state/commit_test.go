// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"podmin.dev/podmin/internal/cache"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/state"
)

// indexWrites are the operations that write the index.
var indexWrites = []faultstore.Op{faultstore.OpPutIfAbsent, faultstore.OpPutIfMatch}

func TestDeployWritesPayloadsAndEntry(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	c := committer(b, 4)
	d := deployment("workers", "web", "product", "example/web:v1", "frontend")
	res, err := c.Deploy(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != state.Created || res.Replaced != nil || res.Key != d.Key {
		t.Fatalf("result %+v", res)
	}
	for p, want := range map[string][]byte{res.Entry.Pod: d.Pod, res.Entry.Service: d.Service} {
		obj, err := b.Get(ctx, p, objstore.GetOptions{})
		if err != nil || !bytes.Equal(obj.Data, want) {
			t.Fatalf("object %s = %q, %v", p, obj.Data, err)
		}
	}
	wantPod, _ := state.PodPayloadPath("workers", d.Pod)
	wantSvc, _ := state.ServicePayloadPath("product", "frontend", d.Service)
	if e, ok := readIndex(t, b).Lookup(d.Key); !ok || e.Pod != wantPod || e.Service != wantSvc {
		t.Fatalf("index entry %+v, %v", e, ok)
	}

	again, err := c.Deploy(ctx, d)
	if err != nil || again.Outcome != state.Unchanged || again.Entry != res.Entry {
		t.Fatalf("re-deploy: %+v, %v", again, err)
	}
	d2 := deployment("workers", "web", "product", "example/web:v2", "")
	upd, err := c.Deploy(ctx, d2)
	if err != nil || upd.Outcome != state.Updated || upd.Replaced != nil || upd.Entry.Service != "" {
		t.Fatalf("update: %+v, %v", upd, err)
	}
	del, err := c.Delete(ctx, d.Key)
	if err != nil || del.Outcome != state.Deleted || del.Entry != upd.Entry {
		t.Fatalf("delete: %+v, %v", del, err)
	}
	del, err = c.Delete(ctx, d.Key)
	if err != nil || del.Outcome != state.Absent {
		t.Fatalf("second delete: %+v, %v", del, err)
	}
	if n := readIndex(t, b).Len(); n != 0 {
		t.Fatalf("index has %d entries after delete", n)
	}
	// Delete never removes payloads.
	if _, err := b.Head(ctx, res.Entry.Pod); err != nil {
		t.Fatalf("payload removed: %v", err)
	}
}

func TestDeployValidation(t *testing.T) {
	c := committer(newLocal(t), 4)
	d := deployment("workers", "web", "product", "example/web:v1", "frontend")
	for _, tc := range []struct {
		name string
		edit func(*state.Deployment)
		err  string
	}{
		{"namespace differs from Pod", func(d *state.Deployment) { d.Namespace = "default" }, `the Pod payload is in namespace "product", not "default": pass the namespace of the extracted Pod`},
		{"empty Pod", func(d *state.Deployment) { d.Pod = nil }, "has an empty Pod payload"},
		{"not YAML", func(d *state.Deployment) { d.Pod = []byte("\t:") }, "pass the canonical Pod YAML"},
		{"Service name without payload", func(d *state.Deployment) { d.Service = nil }, "a Service needs both its name and its payload"},
		{"bad Service name", func(d *state.Deployment) { d.ServiceName = "Front" }, `invalid Service name "Front"`},
		{"bad key", func(d *state.Deployment) { d.Key.Name = "a/b" }, `invalid deployment name "a/b"`},
		{"bad nodegroup", func(d *state.Deployment) { d.Key.NodeGroup = "_system" }, `invalid NodeGroup ID "_system"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dd := d
			tc.edit(&dd)
			_, err := c.Deploy(context.Background(), dd)
			checkErr(t, "Deploy", err, tc.err)
		})
	}
	_, err := c.Delete(context.Background(), state.Key{NodeGroup: "workers", Name: "../x"})
	checkErr(t, "Delete", err, `invalid deployment name "../x"`)
}

func TestReplacedNamespace(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	c := committer(b, 4)
	// Without a Service the old namespace comes from the old Pod payload.
	if _, err := c.Deploy(ctx, deployment("workers", "web", "team-a", "example/web:v1", "")); err != nil {
		t.Fatal(err)
	}
	res, err := c.Deploy(ctx, deployment("workers", "web", "team-b", "example/web:v1", ""))
	if err != nil || res.Outcome != state.Updated || res.Replaced == nil || res.Replaced.Namespace != "team-a" {
		t.Fatalf("cross-namespace replace: %+v %+v, %v", res, res.Replaced, err)
	}
	// A same-namespace update is no replacement.
	res, err = c.Deploy(ctx, deployment("workers", "web", "team-b", "example/web:v2", "frontend"))
	if err != nil || res.Replaced != nil {
		t.Fatalf("same-namespace update: %+v, %v", res, err)
	}
	// With a Service the old namespace is in the Service path; no payload read.
	res, err = c.Deploy(ctx, deployment("workers", "web", "team-c", "example/web:v2", ""))
	if err != nil || res.Replaced == nil || res.Replaced.Namespace != "team-b" || res.Replaced.Entry.Service == "" {
		t.Fatalf("replace of a deployment with a Service: %+v, %v", res, err)
	}
	// An unreadable old payload is not claimed to be a replacement (its
	// namespace is unknown), and the deploy that repairs it succeeds.
	if err := b.Delete(ctx, res.Entry.Pod, ""); err != nil {
		t.Fatal(err)
	}
	res, err = c.Deploy(ctx, deployment("workers", "web", "team-c", "example/web:v3", ""))
	if err != nil || res.Outcome != state.Updated || res.Replaced != nil {
		t.Fatalf("replace of an unreadable deployment: %+v, %v", res, err)
	}
}

func TestServiceConflict(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	c := committer(b, 4)
	if _, err := c.Deploy(ctx, deployment("workers", "web", "product", "example/web:v1", "frontend")); err != nil {
		t.Fatal(err)
	}
	before := readIndex(t, b).Encode()
	_, err := c.Deploy(ctx, deployment("other", "api", "product", "example/api:v1", "frontend"))
	checkErr(t, "Deploy", err, `deploy "other/api": conflict: Service "product/frontend" is already owned by deployment "workers/web": delete that deployment first or rename the Service`)
	if !errors.Is(err, state.ErrConflict) {
		t.Fatalf("error %v does not wrap ErrConflict", err)
	}
	if after := readIndex(t, b).Encode(); !bytes.Equal(before, after) {
		t.Fatalf("refused deploy changed the index:\n%s", after)
	}
	// The same Service name in another namespace is another identity.
	if _, err := c.Deploy(ctx, deployment("other", "api", "default", "example/api:v1", "frontend")); err != nil {
		t.Fatal(err)
	}
	// The owner may drop its Service; then the identity is free.
	if _, err := c.Deploy(ctx, deployment("workers", "web", "product", "example/web:v1", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Deploy(ctx, deployment("other", "api2", "product", "example/api:v1", "frontend")); err != nil {
		t.Fatal(err)
	}
}

// A corrupt object at a content-addressed path is garbage: deploy replaces
// it with a write conditional on its ETag and reports the repair.
func TestCorruptExistingPayload(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	d := deployment("workers", "web", "default", "example/web:v1", "")
	p, _ := state.PodPayloadPath("workers", d.Pod)
	if _, err := b.Put(ctx, p, []byte("truncated")); err != nil {
		t.Fatal(err)
	}
	fs := faultstore.New(b)
	res, err := committer(fs, 4).Deploy(ctx, d)
	if err != nil || res.Outcome != state.Created || len(res.Repaired) != 1 || res.Repaired[0] != p {
		t.Fatalf("%+v, %v", res, err)
	}
	// Index read, refused create, read of the corrupt object, conditional
	// replace, index create, view write.
	if c := fs.Counts(); c != (faultstore.Counts{Get: 2, PutIfAbsent: 2, PutIfMatch: 1, Put: 1}) {
		t.Fatalf("requests %+v", c)
	}
	if _, err := state.FetchPayload(ctx, b, p); err != nil {
		t.Fatalf("after the repair: %v", err)
	}
	checkBucket(t, b)
}

// An identical re-deploy proves the payloads the entry names present and
// intact: with their stamps one Head each, without them one read each. A
// payload deleted or damaged in the bucket is rewritten and the outcome
// is repaired, never unchanged.
func TestIdenticalRedeployRepairsPayloads(t *testing.T) {
	ctx := context.Background()
	for _, warm := range []bool{true, false} {
		t.Run(map[bool]string{true: "stamps", false: "no cache"}[warm], func(t *testing.T) {
			b := newLocal(t)
			fs := faultstore.New(b)
			opts := state.CommitOptions{MaxAttempts: 4, Sleep: noSleep}
			if warm {
				opts.Cache = state.ScopedCache(cache.Open(t.TempDir(), 0), "test bucket")
			}
			c := state.NewCommitter(fs, opts)
			d := deployment("workers", "web", "product", "example/web:v1", "frontend")
			first, err := c.Deploy(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			pod, svc := first.Entry.Pod, first.Entry.Service
			redeploy := func(want state.Outcome, repaired []string, requests faultstore.Counts) {
				t.Helper()
				fs.ResetCounts()
				res, err := c.Deploy(ctx, d)
				if err != nil || res.Outcome != want || !slices.Equal(res.Repaired, repaired) {
					t.Fatalf("re-deploy: %+v, %v; want %s repairing %q", res, err, want, repaired)
				}
				if got := fs.Counts(); got != requests {
					t.Errorf("re-deploy: requests %+v, want %+v", got, requests)
				}
				checkBucket(t, b)
			}
			if warm {
				redeploy(state.Unchanged, nil, faultstore.Counts{Get: 1, Head: 2})
			} else {
				redeploy(state.Unchanged, nil, faultstore.Counts{Get: 3, Head: 2})
			}
			if err := b.Delete(ctx, pod, ""); err != nil {
				t.Fatal(err)
			}
			want := faultstore.Counts{Get: 1, Head: 2, PutIfAbsent: 1}
			if !warm {
				want.Get++ // the Service payload is read to verify it
			}
			redeploy(state.Repaired, []string{pod}, want)
			if _, err := b.Put(ctx, svc, []byte("bit rot")); err != nil {
				t.Fatal(err)
			}
			want = faultstore.Counts{Get: 2, Head: 2, PutIfMatch: 1}
			if !warm {
				want.Get++ // the Pod payload is read to verify it
			}
			redeploy(state.Repaired, []string{svc}, want)
		})
	}
}

// The repair is conditional: a writer that replaced the corrupt object in
// the meantime is not overwritten, and its good bytes are accepted.
func TestCorruptPayloadRepairIsConditional(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	d := deployment("workers", "web", "default", "example/web:v1", "")
	p, _ := state.PodPayloadPath("workers", d.Pod)
	if _, err := b.Put(ctx, p, []byte("truncated")); err != nil {
		t.Fatal(err)
	}
	// Another repairer wins between our read and our conditional write.
	fs := faultstore.New(&racingRepair{Store: b, key: p, data: d.Pod})
	res, err := committer(fs, 4).Deploy(ctx, d)
	if err != nil || res.Outcome != state.Created || len(res.Repaired) != 0 {
		t.Fatalf("%+v, %v", res, err)
	}
	if c := fs.Counts(); c.PutIfMatch != 1 || c.Get != 3 {
		t.Fatalf("requests %+v", c)
	}
	checkBucket(t, b)
}

// racingRepair writes the right bytes to key just before the first
// conditional write of key, as a concurrent deploy would.
type racingRepair struct {
	objstore.Store
	key  string
	data []byte
	done bool
}

func (r *racingRepair) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if key == r.key && !r.done {
		r.done = true
		if _, err := r.Store.Put(ctx, key, r.data); err != nil {
			return "", err
		}
	}
	return r.Store.PutIfMatch(ctx, key, data, etag)
}

func TestInvalidIndexIsNotRetried(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	if _, err := b.Put(ctx, state.IndexPath, []byte(`{"workers/web": {}}`)); err != nil {
		t.Fatal(err)
	}
	slept := 0
	c := state.NewCommitter(b, state.CommitOptions{Sleep: func(context.Context, time.Duration) error { slept++; return nil }})
	_, err := c.Delete(ctx, state.Key{NodeGroup: "workers", Name: "web"})
	if !errors.Is(err, state.ErrInvalidIndex) || slept != 0 {
		t.Fatalf("err %v after %d sleeps", err, slept)
	}
}

func TestBackoffIsJitteredExponentialAndBounded(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	h := faultstore.New(b, faultstore.WithRules(faultstore.Rule{
		Action: faultstore.Fail, Ops: indexWrites, Prefix: state.IndexPath, Err: objstore.ErrPrecondition,
	}))
	var delays []time.Duration
	c := state.NewCommitter(h, state.CommitOptions{
		MaxAttempts: 5,
		BaseDelay:   10 * time.Millisecond,
		MaxDelay:    40 * time.Millisecond,
		Rand:        func() float64 { return 0.5 },
		Sleep:       func(_ context.Context, d time.Duration) error { delays = append(delays, d); return nil },
	})
	_, err := c.Deploy(ctx, deployment("workers", "web", "default", "example/web:v1", ""))
	checkErr(t, "Deploy", err, `deploy "workers/web": gave up after 5 attempts: another writer changed deployments/index.json`)
	if !errors.Is(err, objstore.ErrPrecondition) || errors.Is(err, state.ErrOutcomeUnknown) {
		t.Fatalf("error %v", err)
	}
	// d/2 + 0.5*d/2 for d = 10, 20, 40, 40 ms.
	want := []time.Duration{7500 * time.Microsecond, 15 * time.Millisecond, 30 * time.Millisecond, 30 * time.Millisecond}
	if fmt.Sprint(delays) != fmt.Sprint(want) || h.Counts().PutIfAbsent != 1+5 || h.Counts().Get != 5 {
		t.Fatalf("delays %v (want %v), requests %+v", delays, want, h.Counts())
	}
}

func TestCancelledDuringBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	b := newLocal(t)
	h := &fakeInterleaving{Store: b, before: func(int) error { cancel(); return objstore.ErrPrecondition }}
	_, err := state.NewCommitter(h, state.CommitOptions{}).Deploy(ctx, deployment("workers", "web", "default", "example/web:v1", ""))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

func TestVanishedIndexIsReread(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	c := committer(b, 4)
	if _, err := c.Deploy(ctx, deployment("workers", "web", "default", "example/web:v1", "")); err != nil {
		t.Fatal(err)
	}
	// The index disappears between the read and the If-Match write.
	h := &fakeInterleaving{Store: b, before: func(n int) error {
		if n == 1 {
			return b.Delete(ctx, state.IndexPath, "")
		}
		return nil
	}}
	res, err := committer(h, 4).Deploy(ctx, deployment("workers", "api", "default", "example/api:v1", ""))
	if err != nil || res.Outcome != state.Created || h.n != 2 {
		t.Fatalf("%+v, %v after %d writes", res, err, h.n)
	}
	if ix := readIndex(t, b); ix.Len() != 1 {
		t.Fatalf("index has %d entries, want only workers/api", ix.Len())
	}
}

// TestMissingBucketIsNotEmpty checks that a missing bucket is an error at
// once (no retries) and never reads as an empty index.
func TestMissingBucketIsNotEmpty(t *testing.T) {
	ctx := context.Background()
	b := local.Open(filepath.Join(t.TempDir(), "gone"))
	if _, _, err := state.ReadIndex(ctx, b); !errors.Is(err, objstore.ErrBucketNotFound) {
		t.Fatalf("ReadIndex on a missing bucket error = %v, want ErrBucketNotFound", err)
	}
	slept := 0
	c := state.NewCommitter(b, state.CommitOptions{Sleep: func(context.Context, time.Duration) error { slept++; return nil }})
	if _, err := c.Delete(ctx, state.Key{NodeGroup: "workers", Name: "web"}); !errors.Is(err, objstore.ErrBucketNotFound) || slept != 0 {
		t.Errorf("Delete on a missing bucket: %v after %d sleeps, want ErrBucketNotFound at once", err, slept)
	}
	if _, err := c.Deploy(ctx, deployment("workers", "web", "default", "registry.podmin.internal/apps/web:v1", "")); !errors.Is(err, objstore.ErrBucketNotFound) || slept != 0 {
		t.Errorf("Deploy on a missing bucket: %v after %d sleeps, want ErrBucketNotFound at once", err, slept)
	}
}
