// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

func TestParsePick(t *testing.T) {
	for in, want := range map[string]string{
		"workers/web=0123abcd":                     "workers/web=0123abcd",
		"workers/web=sha512:0123abcdef":            "workers/web=0123abcdef",
		"workers/web=none":                         "workers/web=none",
		"service:product/front=89abcdef0":          "service:product/front=89abcdef0",
		"workers/web":                              "error: want <nodegroup>/<name>=<digest>",
		"workers/web=0123":                         "error: the digest must be 8 to 128 lowercase hex characters",
		"workers/web=0123ABCD":                     "error: the digest must be",
		"Workers/web=0123abcd":                     "error: invalid deployment key",
		"service:product/front=none":               "error: a Service cannot be left out on its own",
		"service:product=0123abcd":                 "error: pick \"service:product=0123abcd\"",
		"workers/web=" + strings.Repeat("a", 129):  "error: the digest must be",
		"service:Product/front=0123abcd":           "error: pick",
		"service:product/front/x=0123abcd0123abcd": "error: pick",
	} {
		p, err := state.ParsePick(in)
		switch {
		case strings.HasPrefix(want, "error: "):
			checkErr(t, in, err, strings.TrimPrefix(want, "error: "))
		case err != nil || p.String() != want:
			t.Errorf("ParsePick(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
}

func TestRebuildLocal(t *testing.T) { testRebuild(t, newLocal(t)) }

// rebuildFixture is a bucket whose history left several payloads: web in
// two versions with two versions of its Service, api once, and db, which
// was deleted.
type rebuildFixture struct {
	web1, web2, api, db state.Entry
}

func newRebuildFixture(t *testing.T, b objstore.Store) rebuildFixture {
	ctx := context.Background()
	c := committer(b, 4)
	deploy := func(d state.Deployment) state.Entry {
		t.Helper()
		res, err := c.Deploy(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		return res.Entry
	}
	var f rebuildFixture
	f.web1 = deploy(deployment("workers", "web", "product", "example/web:v1", "front"))
	web2 := deployment("workers", "web", "product", "example/web:v2", "front")
	web2.Service = serviceYAML("product", "front", 8443)
	f.web2 = deploy(web2)
	f.api = deploy(deployment("workers", "api", "product", "example/api:v1", ""))
	f.db = deploy(deployment("edge", "db", "default", "example/db:v1", ""))
	if _, err := c.Delete(ctx, state.Key{NodeGroup: "edge", Name: "db"}); err != nil {
		t.Fatal(err)
	}
	return f
}

func digestOf(t *testing.T, p string) string {
	t.Helper()
	i := strings.LastIndex(p, "/")
	return strings.TrimSuffix(p[i+1:], ".yaml")
}

// corrupt replaces the index with bytes that do not decode: the entry of
// web is kept readable or damaged as asked, api's is always damaged, and
// the object ends in garbage.
func corrupt(t *testing.T, b objstore.Store, f rebuildFixture, webReadable bool) {
	t.Helper()
	web := fmt.Sprintf(`"workers/web": {"pod": %q, "service": %q}`, f.web2.Pod, f.web2.Service)
	if !webReadable {
		web = `"workers/web": {"pod": "nodegroups/workers/pods/sha512/` // cut off
	}
	data := fmt.Sprintf("{\n  %s,\n  \"workers/api\": {\"pod\": %q, \"owner\": \"x\"}\n}\n\x00\x00garbage", web, f.api.Pod)
	if _, err := b.Put(context.Background(), state.IndexPath, []byte(data)); err != nil {
		t.Fatal(err)
	}
}

// testRebuild plans and writes rebuilt indexes from a corrupt one: its
// readable entries are kept, every other name comes from the payloads,
// several payloads for one name (or one Service) are refused until
// picked, and the write is a compare-and-swap on the corrupt version.
func testRebuild(t *testing.T, store objstore.Store) {
	ctx := context.Background()
	// Write times from a fake clock: whether a view is newer than a
	// payload must not depend on the store's clock resolution.
	b := newFakeClockStore(store)
	f := newRebuildFixture(t, b)
	c := committer(b, 4)

	_, err := state.PlanRebuild(ctx, b, nil, nil)
	if !errors.Is(err, state.ErrIndexValid) {
		t.Fatalf("plan of a valid index: %v", err)
	}
	checkErr(t, "valid index", err, "decodes with 2 deployments")

	// web readable: kept; api damaged: its view names it; db: deleted,
	// as the view of its NodeGroup, newer than its payload, shows.
	corrupt(t, b, f, true)
	plan, err := state.PlanRebuild(ctx, b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"workers/web": state.FromIndex, "workers/api": state.FromView}
	if got := sources(plan); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("plan sources %v, want %v", got, want)
	}
	if len(plan.Dropped) != 2 || plan.Dropped[0].Deployment != "edge/db" || !strings.Contains(plan.Dropped[0].Reason, "deleted: the NodeGroup view deployments/nodegroups/edge.json") ||
		plan.Dropped[1].Deployment != "workers/api" || !strings.Contains(plan.Dropped[1].Reason, `unknown field "owner"`) {
		t.Fatalf("dropped %+v", plan.Dropped)
	}
	if !strings.Contains(plan.Problem, "deployments/index.json does not decode: ") {
		t.Errorf("problem %q", plan.Problem)
	}
	if e, _ := plan.Index.Lookup(state.Key{NodeGroup: "workers", Name: "web"}); e != f.web2 {
		t.Errorf("web in the plan: %+v, want the readable entry %+v", e, f.web2)
	}
	plan, err = state.PlanRebuild(ctx, b, nil, picks(t, "edge/db=none"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plan.Index.Lookup(state.Key{NodeGroup: "edge", Name: "db"}); ok || plan.Index.Len() != 2 {
		t.Fatalf("db left out: %s", plan.Index.Encode())
	}
	// A plan made against one corrupt version is not written over another.
	if _, err := b.Put(ctx, state.IndexPath, []byte("{ not json")); err != nil {
		t.Fatal(err)
	}
	checkErr(t, "stale plan", c.WriteRebuild(ctx, plan), "the index changed since the plan was made")

	// web unreadable: its view names its newest version, and its Service.
	corrupt(t, b, f, false)
	plan, err = state.PlanRebuild(ctx, b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := plan.Index.Lookup(state.Key{NodeGroup: "workers", Name: "web"}); e != f.web2 || sources(plan)["workers/web"] != state.FromView {
		t.Fatalf("web from its view: %+v from %q, want %+v", e, sources(plan)["workers/web"], f.web2)
	}
	// Without the view, two Pod payloads and two Service payloads name
	// it (and api's one payload is no proof that it is live).
	view, _ := state.ViewPath("workers")
	if err := b.Delete(ctx, view, ""); err != nil {
		t.Fatal(err)
	}
	_, err = state.PlanRebuild(ctx, b, nil, picks(t, "edge/db=none"))
	checkErr(t, "api without a view", err, "workers/api: it has one Pod payload, and no NodeGroup view of workers can tell whether it was deleted (there is none)")
	api := "workers/api=" + digestOf(t, f.api.Pod)[:12]
	_, err = state.PlanRebuild(ctx, b, nil, picks(t, "edge/db=none", api))
	var amb *state.AmbiguousError
	if !errors.As(err, &amb) || !errors.Is(err, state.ErrRebuildAmbiguous) || len(amb.Ambiguities) != 1 || amb.Ambiguities[0].Subject != "workers/web" {
		t.Fatalf("web unreadable: %v", err)
	}
	for _, p := range []string{f.web1.Pod, f.web2.Pod} {
		checkErr(t, "ambiguity", err, "--pick workers/web="+digestOf(t, p)[:16])
	}
	checkErr(t, "ambiguity", err, "images example/web:v")
	v1 := digestOf(t, f.web1.Pod)[:10]
	_, err = state.PlanRebuild(ctx, b, nil, picks(t, "edge/db=none", api, "workers/web="+v1))
	if !errors.As(err, &amb) || len(amb.Ambiguities) != 1 || amb.Ambiguities[0].Subject != "service:product/front" {
		t.Fatalf("web picked, its Service not: %v", err)
	}
	checkErr(t, "ambiguity", err, "--pick service:product/front="+digestOf(t, f.web1.Service)[:16])
	_, err = state.PlanRebuild(ctx, b, nil, picks(t, "edge/db=none", api, "workers/web="+v1, "service:product/front="+digestOf(t, f.web1.Service), "workers/nope=none"))
	checkErr(t, "unused pick", err, "--pick workers/nope=none matches nothing to choose")
	plan, err = state.PlanRebuild(ctx, b, nil, picks(t, "edge/db=none", api, "workers/web="+v1, "service:product/front="+digestOf(t, f.web1.Service)))
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := plan.Index.Lookup(state.Key{NodeGroup: "workers", Name: "web"}); e != f.web1 {
		t.Fatalf("web picked: %+v, want %+v", e, f.web1)
	}
	if err := c.WriteRebuild(ctx, plan); err != nil {
		t.Fatal(err)
	}
	ix := readIndex(t, b)
	if string(ix.Encode()) != string(plan.Index.Encode()) || ix.Len() != 2 {
		t.Fatalf("rebuilt index %s, planned %s", ix.Encode(), plan.Index.Encode())
	}
	// The rebuilt index is a normal one: deploys work again.
	if _, err := c.Deploy(ctx, deployment("workers", "web", "product", "example/web:v2", "")); err != nil {
		t.Fatalf("deploy after the rebuild: %v", err)
	}
	if _, err := state.PlanRebuild(ctx, b, nil, nil); !errors.Is(err, state.ErrIndexValid) {
		t.Fatalf("plan after the rebuild: %v", err)
	}
}

func sources(plan *state.RebuildPlan) map[string]string {
	out := map[string]string{}
	for _, e := range plan.Entries {
		out[e.Key.String()] = e.Source
	}
	return out
}

func picks(t *testing.T, ss ...string) []state.Pick {
	t.Helper()
	var out []state.Pick
	for _, s := range ss {
		p, err := state.ParsePick(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// A readable entry whose payload is gone is not kept; a Service claimed by
// two deployments is refused until one is left out; a corrupt payload is
// skipped and reported; without an index at all, the payloads are the
// whole plan, written create-only.
func TestRebuildEdgeCases(t *testing.T) {
	ctx := context.Background()
	b := newLocal(t)
	f := newRebuildFixture(t, b)
	if err := b.Delete(ctx, f.api.Pod, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, f.db.Pod, []byte("bit rot")); err != nil {
		t.Fatal(err)
	}
	// Payloads of two more deployments: one names a Service without any
	// payload, one claims web's Service.
	for _, d := range []state.Deployment{
		deployment("edge", "side", "product", "example/side:v1", "side"),
		deployment("edge", "proxy", "product", "example/proxy:v1", "front"),
	} {
		if _, err := b.PutIfAbsent(ctx, mustPodPath(t, d), d.Pod); err != nil {
			t.Fatal(err)
		}
	}
	data := fmt.Sprintf(`{"workers/web": {"pod": %q, "service": %q}, "workers/api": {"pod": %q}, }`, f.web2.Pod, f.web2.Service, f.api.Pod)
	if _, err := b.Put(ctx, state.IndexPath, []byte(data)); err != nil {
		t.Fatal(err)
	}
	subjects := func(err error) string {
		var amb *state.AmbiguousError
		if !errors.As(err, &amb) {
			return fmt.Sprint(err)
		}
		var out []string
		for _, a := range amb.Ambiguities {
			out = append(out, a.Subject)
		}
		return strings.Join(out, " ")
	}
	// Both were written after the view of edge, which does not list them:
	// deploys that never committed, or whose view was not written yet.
	_, err := state.PlanRebuild(ctx, b, nil, nil)
	if got := subjects(err); got != "edge/proxy edge/side" {
		t.Fatalf("plan: %s", got)
	}
	checkErr(t, "edge/side", err, "written at or after it")
	side := "edge/side=" + digestOf(t, mustPodPath(t, deployment("edge", "side", "product", "example/side:v1", "side")))[:12]
	proxy := "edge/proxy=" + digestOf(t, mustPodPath(t, deployment("edge", "proxy", "product", "example/proxy:v1", "front")))[:12]
	_, err = state.PlanRebuild(ctx, b, nil, picks(t, side, proxy))
	if got := subjects(err); got != "edge/side service:product/front" {
		t.Fatalf("plan: %s", got)
	}
	checkErr(t, "edge/side", err, "its Pod names Service product/side, which has no payload in the bucket; leave the deployment out")
	checkErr(t, "edge/side", err, "--pick edge/side=none")
	webService := "service:product/front=" + digestOf(t, f.web2.Service)
	_, err = state.PlanRebuild(ctx, b, nil, picks(t, "edge/side=none", proxy, webService))
	if got := subjects(err); got != "service:product/front" {
		t.Fatalf("plan with the Service picked: %s", got)
	}
	checkErr(t, "claimed twice", err, "claimed by 2 deployments")
	checkErr(t, "claimed twice", err, "--pick edge/proxy=none")
	checkErr(t, "claimed twice", err, "--pick workers/web=none")
	plan, err := state.PlanRebuild(ctx, b, nil, picks(t, "edge/side=none", "edge/proxy=none"))
	if err != nil {
		t.Fatal(err)
	}
	if got := sources(plan); fmt.Sprint(got) != fmt.Sprint(map[string]string{"workers/web": state.FromIndex}) {
		t.Fatalf("sources %v", got)
	}
	if len(plan.Skipped) != 1 || !strings.Contains(plan.Skipped[0], f.db.Pod) {
		t.Errorf("skipped %q, want the corrupt db payload", plan.Skipped)
	}
	dropped := fmt.Sprint(plan.Dropped)
	if !strings.Contains(dropped, "workers/api") || !strings.Contains(dropped, "is missing from the bucket") {
		t.Errorf("dropped %s", dropped)
	}

	// No index at all.
	if err := b.Delete(ctx, state.IndexPath, ""); err != nil {
		t.Fatal(err)
	}
	plan, err = state.PlanRebuild(ctx, b, nil, picks(t, "edge/side=none", "edge/proxy=none", "workers/web="+digestOf(t, f.web2.Pod)[:12], "service:product/front="+digestOf(t, f.web2.Service)[:12]))
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Missing || plan.Index.Len() != 1 {
		t.Fatalf("plan without an index: %+v", plan)
	}
	if err := committer(b, 4).WriteRebuild(ctx, plan); err != nil {
		t.Fatal(err)
	}
	if e, _ := readIndex(t, b).Lookup(state.Key{NodeGroup: "workers", Name: "web"}); e != f.web2 {
		t.Fatalf("rebuilt %+v", e)
	}
	empty := newLocal(t)
	if _, err := state.PlanRebuild(ctx, empty, nil, nil); !errors.Is(err, state.ErrNothingToRebuild) {
		t.Fatalf("empty bucket: %v", err)
	}
}

func mustPodPath(t *testing.T, d state.Deployment) string {
	t.Helper()
	p, err := state.PodPayloadPath(d.Key.NodeGroup, d.Pod)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A rebuild write whose reply is lost is resolved like any index write:
// its own write ID proves it landed; the corrupt version still there
// proves it did not, and it is written again.
func TestRebuildWriteLostReply(t *testing.T) {
	ctx := context.Background()
	for _, landed := range []bool{true, false} {
		b := newLocal(t)
		f := newRebuildFixture(t, b)
		corrupt(t, b, f, true)
		plan, err := state.PlanRebuild(ctx, b, nil, picks(t, "edge/db=none"))
		if err != nil {
			t.Fatal(err)
		}
		h := &fakeInterleaving{Store: b}
		hook := func(n int) error {
			if n == 1 {
				return errLost
			}
			return nil
		}
		if landed {
			h.after = hook
		} else {
			h.before = hook
		}
		if err := committer(h, 4).WriteRebuild(ctx, plan); err != nil {
			t.Fatalf("landed %v: %v", landed, err)
		}
		if want := map[bool]int{true: 1, false: 2}[landed]; h.n != want {
			t.Errorf("landed %v: %d index writes, want %d", landed, h.n, want)
		}
		if string(readIndex(t, b).Encode()) != string(plan.Index.Encode()) {
			t.Errorf("landed %v: the index is not the plan", landed)
		}
	}
}
