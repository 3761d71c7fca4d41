// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
)

// A stale writer's fork: W2 read version X, the index moved on to Y and
// back to X's bytes in Z, and W2's If-Match on X's ETag lands on Z,
// recording X's history and erasing Y's and Z's IDs. What the metadata
// proves about each NodeGroup still holds, because W2's change was
// computed from X's content, which is Z's.
func TestStaleWriterForkKeepsProofsSound(t *testing.T) {
	ctx := context.Background()
	store := local.Open(filepath.Join(t.TempDir(), "bucket"))
	if err := store.CreateBucket(ctx); err != nil {
		t.Fatal(err)
	}
	c := NewCommitter(store, CommitOptions{})
	pod := func(ng, name string) Entry {
		p, err := PodPayloadPath(ng, []byte(ng+"/"+name))
		if err != nil {
			t.Fatal(err)
		}
		return Entry{Pod: p}
	}
	set := func(base indexVersion, k Key, e *Entry) indexVersion {
		t.Helper()
		ix, err := DecodeIndex(base.ix.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			ix.Remove(k)
		} else if _, _, err := ix.Set(k, *e); err != nil {
			t.Fatal(err)
		}
		if _, err := c.writeIndex(ctx, base, ix.Encode(), randomWriteID(), changeOf(ix, false, k.NodeGroup)); err != nil {
			t.Fatal(err)
		}
		v, err := readIndexVersion(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	empty, err := readIndexVersion(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	a, b, h := Key{"g", "a"}, Key{"g", "b"}, Key{"h", "c"}
	ea, eb, eh := pod("g", "a"), pod("g", "b"), pod("h", "c")
	x := set(empty, a, &ea)
	y := set(x, b, &eb)
	z := set(y, b, nil)
	if !objstore.SameETag(x.etag, z.etag) {
		t.Fatalf("X and Z hold the same bytes but have ETags %s and %s", x.etag, z.etag)
	}
	// W2 built on X lands on Z.
	w2 := set(x, h, &eh)
	if !slices.Equal(w2.chain[1:], x.chain) {
		t.Fatalf("W2's chain %v does not continue X's %v", w2.chain, x.chain)
	}
	meta := IndexMeta{Chain: w2.chain, hist: w2.hist}
	gView := w2.ix.NodeGroupView("g")
	if string(gView) != string(z.ix.NodeGroupView("g")) || string(gView) == string(y.ix.NodeGroupView("g")) {
		t.Fatal("the model is wrong: g's content in W2 is Z's and not Y's")
	}
	// A node that applied Z: Z's ID is erased, but the digest shows g is
	// what it published.
	if p := meta.NodeGroup("g", z.chain[0]); p.Unchanged || p.Digest != ViewDigest("g", gView) {
		t.Fatalf("g since Z: %+v", p)
	}
	// A node that applied Y: the digest differs from what it published,
	// so it reads the view (or the index).
	if p := meta.NodeGroup("g", y.chain[0]); p.Unchanged || p.Digest == ViewDigest("g", y.ix.NodeGroupView("g")) {
		t.Fatalf("g since Y: %+v", p)
	}
	// A node that applied X: g is unchanged since, which is true.
	if p := meta.NodeGroup("g", x.chain[0]); !p.Unchanged {
		t.Fatalf("g since X: %+v", p)
	}
	// h changed in W2 itself.
	if p := meta.NodeGroup("h", x.chain[0]); p.Unchanged || p.Digest != ViewDigest("h", w2.ix.NodeGroupView("h")) {
		t.Fatalf("h since X: %+v", p)
	}
}

// The history survives a chain at its full length, with as many NodeGroups
// as fit beside it, within S3's 2 KiB of user metadata.
func TestNodeGroupHistoryFitsTheMetadataLimit(t *testing.T) {
	var base indexVersion
	base.exists = true
	for i := range maxWriteChain * 2 {
		ng := "nodegroup-with-a-long-name-" + string(rune('a'+i%26))
		ix := NewIndex()
		m := writeMeta(randomWriteID(), base, changeOf(ix, false, ng))
		if err := objstore.ValidateMetadata(m); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		meta := ParseIndexMeta(m)
		if len(meta.hist.touches) == 0 || meta.hist.touches[0].age != 0 {
			t.Fatalf("write %d: history %+v", i, meta.hist)
		}
		base.chain, base.hist = meta.Chain, meta.hist
	}
	if len(base.chain) != maxWriteChain || len(base.hist.touches) < 13 || base.hist.horizon < 13 {
		t.Fatalf("chain %d, history %d NodeGroups, horizon %d", len(base.chain), len(base.hist.touches), base.hist.horizon)
	}
	// Malformed history proves nothing.
	for _, v := range []string{"zz", "01,", "60" + ",0000000000000000000000000000", "01,abcdefab0123456789abcdefff"} {
		if h := parseNGHistory(v, 96); h.horizon != 0 || len(h.touches) != 0 {
			t.Errorf("%q parsed as %+v", v, h)
		}
	}
}
