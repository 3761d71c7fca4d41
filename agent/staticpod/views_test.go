// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/faultstore"
	"podmin.dev/podmin/internal/state"
)

// plainStore is the bucket as a reader that knows nothing of views sees
// it: the index without its write metadata, and no views. A reconciler on
// it reads the complete index whenever its ETag changes.
type plainStore struct{ objstore.Store }

func (p plainStore) Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	if strings.HasPrefix(key, state.ViewsPrefix) {
		return objstore.Object{}, fmt.Errorf("hidden %s: %w", key, objstore.ErrNotFound)
	}
	obj, err := p.Store.Get(ctx, key, opts)
	obj.Metadata = nil
	return obj, err
}

func (p plainStore) Head(ctx context.Context, key string) (objstore.Info, error) {
	info, err := p.Store.Head(ctx, key)
	info.Metadata = nil
	return info, err
}

// byteStore counts the object bytes each key prefix returned.
type byteStore struct {
	objstore.Store
	mu    sync.Mutex
	bytes map[string]int
}

func (b *byteStore) Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	obj, err := b.Store.Get(ctx, key, opts)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bytes == nil {
		b.bytes = map[string]int{}
	}
	switch {
	case key == state.IndexPath:
		b.bytes["index"] += len(obj.Data)
	case strings.HasPrefix(key, state.ViewsPrefix):
		b.bytes["view"] += len(obj.Data)
	default:
		b.bytes["payload"] += len(obj.Data)
	}
	return obj, err
}

func (b *byteStore) take() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.bytes
	b.bytes = nil
	return out
}

// nodeOn is a reconciler of NodeGroup workers on store with its own root.
func nodeOn(t testing.TB, store objstore.Store, root string) *staticpod.Reconciler {
	t.Helper()
	r, err := staticpod.New(staticpod.Options{Store: store, Cluster: "demo", NodeGroup: "workers", Root: root,
		Secrets: map[string]mounts.Reader{}, Publisher: &staticpod.Recorder{}, ViewWait: -1})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// deployment extracts a built-in deployment ready to commit.
func deployment(t testing.TB, ng, name, image string, service bool) state.Deployment {
	t.Helper()
	return builtDeployment(t, ng, name, manifest.BuildOptions{Name: name, NodeGroup: ng, Images: []string{image}, Service: service})
}

// A commit to another NodeGroup costs a node one HEAD of the index and no
// bytes; a commit to its own NodeGroup costs the view, not the index.
func TestNodeReadsOnlyItsNodeGroupsChange(t *testing.T) {
	f := newFixture(t)
	counted := &byteStore{Store: f.store}
	r := nodeOn(t, counted, f.root)
	f.deploy(t, "workers", "web", "web:v1", true)
	f.deploy(t, "edge", "proxy", "proxy:v1", false)
	if res := mustReconcile(t, r); res.Read != staticpod.ReadView || res.Pods != 1 {
		t.Fatalf("first pass: %+v", res)
	}
	counted.take()

	f.deploy(t, "edge", "proxy", "proxy:v2", false)
	f.store.ResetCounts()
	if res := mustReconcile(t, r); !res.Unchanged || res.Read != staticpod.ReadMetadata {
		t.Fatalf("unrelated commit: %+v", res)
	}
	if c := f.store.Counts(); c.Head != 1 || c.Total() != 1 {
		t.Fatalf("unrelated commit: requests %+v, want one HEAD", c)
	}
	if b := counted.take(); len(b) != 0 {
		t.Fatalf("unrelated commit read %v bytes", b)
	}
	// Idle again: the same one HEAD.
	f.store.ResetCounts()
	if res := mustReconcile(t, r); !res.Unchanged || res.Read != staticpod.ReadNone || f.store.Counts().Total() != 1 {
		t.Fatalf("idle: %+v, %+v", res, f.store.Counts())
	}

	f.deploy(t, "workers", "api", "api:v1", false)
	f.store.ResetCounts()
	if res := mustReconcile(t, r); res.Read != staticpod.ReadView || res.Pods != 2 || res.Written != 1 {
		t.Fatalf("related commit: %+v", res)
	}
	view, _ := state.ViewPath("workers")
	viewObj, err := f.bucket.Get(context.Background(), view, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b := counted.take(); b["index"] != 0 || b["view"] != len(viewObj.Data) {
		t.Fatalf("related commit read %v bytes, want the %d byte view and none of the index", b, len(viewObj.Data))
	}
	if !strings.Contains(f.files(t)["api.yaml"], "api:v1") {
		t.Fatal("api not published")
	}
}

// A stale or missing view never changes what a node publishes: over random
// commits to two NodeGroups, each followed by a fault of its view (the
// committer stopping between the index and the view write, a view edited
// by hand, one of another version or NodeGroup, a deleted one), a node
// using views publishes exactly what a node reading the complete index
// publishes, with the same Services, after every commit.
func TestViewsNeverChangeWhatANodePublishes(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	subject := nodeOn(t, f.store, f.root)
	refRoot := filepath.Join(t.TempDir(), "reference")
	reference := nodeOn(t, plainStore{f.bucket}, refRoot)
	refFiles := func() map[string]string { g := *f; g.root = refRoot; return g.files(t) }
	view, _ := state.ViewPath("workers")
	edgeView, _ := state.ViewPath("edge")
	var oldViews [][]byte
	faults := []string{"none", "view write lost", "edited", "older version", "other NodeGroup", "deleted", "garbage"}
	seen := map[string]int{}
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 120 {
		ng := []string{"workers", "edge"}[r.IntN(2)]
		name := fmt.Sprintf("%s-app%d", ng, r.IntN(4))
		fault := faults[r.IntN(len(faults))]
		committer := f.bucket
		var store objstore.Store = committer
		if fault == "view write lost" {
			store = faultstore.New(committer, faultstore.WithRules(faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpPut}, Prefix: state.ViewsPrefix}))
		}
		c := state.NewCommitter(store, state.CommitOptions{})
		if r.IntN(4) == 0 {
			if _, err := c.Delete(ctx, state.Key{NodeGroup: ng, Name: name}); err != nil {
				t.Fatal(err)
			}
		} else if _, err := c.Deploy(ctx, deployment(t, ng, name, fmt.Sprintf("img:v%d", i), r.IntN(2) == 0)); err != nil {
			t.Fatal(err)
		}
		cur, err := f.bucket.Get(ctx, view, objstore.GetOptions{})
		if err == nil {
			oldViews = append(oldViews, cur.Data)
		}
		switch fault {
		case "edited":
			// A valid view of the NodeGroup with one entry fewer.
			// (An entry's revisions name pods too: count the entries.)
			if err == nil && strings.Contains(string(cur.Data), "\n  },\n") {
				lines := strings.SplitN(string(cur.Data), "\n  },\n", 2)
				_, err = f.bucket.Put(ctx, view, []byte("{\n"+lines[1]))
			}
		case "older version":
			_, err = f.bucket.Put(ctx, view, oldViews[r.IntN(len(oldViews))])
		case "other NodeGroup":
			if o, gerr := f.bucket.Get(ctx, edgeView, objstore.GetOptions{}); gerr == nil {
				_, err = f.bucket.Put(ctx, view, o.Data)
			}
		case "deleted":
			err = f.bucket.Delete(ctx, view, "")
		case "garbage":
			_, err = f.bucket.Put(ctx, view, []byte("{\"workers/x\": 1}"))
		}
		if err != nil && fault != "none" && fault != "view write lost" {
			t.Fatalf("commit %d, fault %s: %v", i, fault, err)
		}
		res := mustReconcile(t, subject)
		mustReconcile(t, reference)
		seen[res.Read]++
		if got, want := withoutIncarnation(visible(f.files(t))), withoutIncarnation(visible(refFiles())); !equal(got, want) {
			t.Fatalf("commit %d (%s on %s, fault %s, read %s): published %v, the index says %v", i, name, ng, fault, res.Read, names(got), names(want))
		}
	}
	for _, how := range []string{staticpod.ReadMetadata, staticpod.ReadView, staticpod.ReadIndex} {
		if seen[how] == 0 {
			t.Errorf("no pass read %q: %v", how, seen)
		}
	}
	if c := subject.Counters(); c.StaleViews == 0 {
		t.Errorf("no stale view was detected: %+v", c)
	}
	t.Logf("passes by read: %v; stale views: %d", seen, subject.Counters().StaleViews)
}

// A view written for a newer index version than the one a pass acted on is
// not used for it: the pass reads the index (the newer version) and
// confirms that.
func TestViewOfANewerVersionIsNotUsedForAnOlderOne(t *testing.T) {
	f := newFixture(t)
	f.deploy(t, "workers", "web", "web:v1", false)
	var r *staticpod.Reconciler
	committed := false
	// Between the pass's HEAD and its view read, another commit lands.
	hooked := &headHook{Store: f.store, after: func() {
		if !committed {
			committed = true
			f.deploy(t, "workers", "web", "web:v2", false)
		}
	}}
	r = nodeOn(t, hooked, f.root)
	res := mustReconcile(t, r)
	if res.Read != staticpod.ReadIndex || !strings.Contains(f.files(t)["web.yaml"], "web:v2") {
		t.Fatalf("%+v: %s", res, f.files(t)["web.yaml"])
	}
	if c := r.Counters(); c.StaleViews != 1 {
		t.Fatalf("stale views %d, want 1", c.StaleViews)
	}
}

// headHook runs after once every index HEAD.
type headHook struct {
	objstore.Store
	after func()
}

func (h *headHook) Head(ctx context.Context, key string) (objstore.Info, error) {
	info, err := h.Store.Head(ctx, key)
	if key == state.IndexPath {
		h.after()
	}
	return info, err
}

// A view that trails its index write is waited for: the pass reads it
// again once it is written, and does not read the index.
func TestAStaleViewIsWaitedForBriefly(t *testing.T) {
	f := newFixture(t)
	f.deploy(t, "workers", "web", "web:v1", false)
	counted := &byteStore{Store: f.store}
	r, err := staticpod.New(staticpod.Options{Store: counted, Cluster: "demo", NodeGroup: "workers", Root: f.root,
		Secrets: map[string]mounts.Reader{}, Publisher: &staticpod.Recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	mustReconcile(t, r)
	// The committer writes the index and stops before the view; the view
	// arrives while the node waits (here: written by the first retry's
	// HEAD, as the leader would write it).
	lossy := faultstore.New(f.bucket, faultstore.WithRules(faultstore.Rule{Action: faultstore.Fail, Ops: []faultstore.Op{faultstore.OpPut}, Prefix: state.ViewsPrefix}))
	if _, err := state.NewCommitter(lossy, state.CommitOptions{}).Deploy(context.Background(), deployment(t, "workers", "web", "web:v2", false)); err != nil {
		t.Fatal(err)
	}
	heads := 0
	r2, err := staticpod.New(staticpod.Options{Store: &headHook{Store: counted, after: func() {
		heads++
		if heads == 2 {
			meta, ix := indexNow(t, f.bucket)
			if _, err := state.NewViewKeeper(f.bucket).Sync(context.Background(), ix, meta.WriteID(), false); err != nil {
				t.Error(err)
			}
		}
	}}, Cluster: "demo", NodeGroup: "workers", Root: f.root, Secrets: map[string]mounts.Reader{}, Publisher: &staticpod.Recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	counted.take()
	res := mustReconcile(t, r2)
	if res.Read != staticpod.ReadView || !strings.Contains(f.files(t)["web.yaml"], "web:v2") {
		t.Fatalf("%+v", res)
	}
	if b := counted.take(); b["index"] != 0 {
		t.Fatalf("read %v bytes: the index was read", b)
	}
	if c := r2.Counters(); c.StaleViews != 1 {
		t.Fatalf("stale views %d, want 1", c.StaleViews)
	}
}

// indexNow reads the index with its metadata.
func indexNow(t *testing.T, store objstore.Store) (state.IndexMeta, *state.Index) {
	t.Helper()
	obj, err := store.Get(context.Background(), state.IndexPath, objstore.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ix, err := state.DecodeIndex(obj.Data)
	if err != nil {
		t.Fatal(err)
	}
	return state.ParseIndexMeta(obj.Metadata), ix
}
