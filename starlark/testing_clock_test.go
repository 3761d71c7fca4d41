// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
)

// time.now() in a recipe test is the test's virtual clock: it moves with
// the pauses of a wait, so a recipe can measure them.
func TestTimeNowFollowsTheVirtualClock(t *testing.T) {
	sum, out := runSuite(t, `
def test_clock(t):
    t.fake_nodes("canary", state = "not-ready")
    podmin.deployments.deploy("web", nodegroup = "canary", image = "hello:v2")
    before = time.now()
    t.fails(lambda: podmin.deployments.wait("web", nodegroup = "canary", timeout = "10m"), "timed out after 10m0s")
    print("waited", time.now() - before)
`, TestOptions{Verbose: true})
	if sum.Passed != 1 || !strings.Contains(out, "waited 10m0s") {
		t.Fatalf("%+v\n%s", sum, out)
	}
}

// countingWrites counts the writes made through it.
type countingWrites struct {
	objstore.Store
	n atomic.Int64
}

func (c *countingWrites) Put(ctx context.Context, key string, data []byte) (string, error) {
	c.n.Add(1)
	return c.Store.Put(ctx, key, data)
}

// A virtual minute of waiting writes next to nothing: the fake leader
// renews its lease every leaseRenewal and rewrites a NodeGroup's status
// only when the index or the fake state changed, so a tick costs a
// conditional read, not a write with its fsync.
func TestFakeNodesWriteOnlyWhatChanged(t *testing.T) {
	ctx := t.Context()
	b := localstore.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := b.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	store := &countingWrites{Store: b}
	f := newFakeNodes(store, TestClock)
	if err := f.declare(ctx, "workers", fakeGroup{nodes: 3, state: "ready"}); err != nil {
		t.Fatal(err)
	}
	for range 600 { // ten virtual minutes of one-second polls
		if err := f.Sleep(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// The declaration's lease, one renewal per leaseRenewal, the first
	// status object.
	if n, most := store.n.Load(), int64(1+600/int(leaseRenewal/time.Second)+1); n > most {
		t.Fatalf("%d writes for ten virtual minutes, want at most %d", n, most)
	}
	if f.Now().Sub(TestClock) != 10*time.Minute {
		t.Fatalf("the virtual clock moved %s", f.Now().Sub(TestClock))
	}
}
