// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"slices"
	"strings"
	"testing"
)

func TestTextDiff(t *testing.T) {
	before := "a\nb\nc\nd\ne\nf\ng\nh\ni\n"
	after := "a\nb\nc\nd\nE\nf\ng\nh\ni\nj\n"
	got := textDiff(before, after)
	want := []string{"...", " b", " c", " d", "-e", "+E", " f", " g", " h", " i", "+j"}
	if !slices.Equal(got, want) {
		t.Fatalf("textDiff = %q, want %q", got, want)
	}
	if got := textDiff("", "x\ny\n"); !slices.Equal(got, []string{"+x", "+y"}) {
		t.Fatalf("created: %q", got)
	}
}

func TestJSONDiff(t *testing.T) {
	got := jsonDiff([]byte(`{"a": {"pod": "p1", "service": "s1"}, "b": [1, 2]}`), []byte(`{"a": {"pod": "p2"}, "b": [1, 2], "c": true}`))
	want := []string{`~ a.pod: "p1" -> "p2"`, `- a.service: "s1"`, `+ c: true`}
	if !slices.Equal(got, want) {
		t.Fatalf("jsonDiff = %q, want %q", got, want)
	}
}

// TestPlanDiffsReplacedPayloads shows a redeploy's new Pod payload as a
// diff against the payload it replaces.
func TestPlanDiffsReplacedPayloads(t *testing.T) {
	e := newEnv(t)
	if _, err := e.run(Options{}, `podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v1")`+"\n"); err != nil {
		t.Fatal(err)
	}
	h, err := e.run(Options{DryRun: true}, `podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v2")`+"\n")
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := h.Plan().Write(&text, "table"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"(compared with nodegroups/workers/pods/sha512/",
		"      -  - image: registry.podmin.internal/apps/hello:v1\n      +  - image: registry.podmin.internal/apps/hello:v2\n",
		"~ workers/web.pod: ",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, text.String())
		}
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
}

// A revision prepended to an index entry's revisions diffs as one added
// revision, not as every earlier revision shifted one place.
func TestPlanDiffsRevisionsByNumber(t *testing.T) {
	before := []byte(`{"workers/web": {"pod": "a", "revisions": [{"revision":2,"pod":"a"},{"revision":1,"pod":"b"}]}}`)
	after := []byte(`{"workers/web": {"pod": "c", "revisions": [{"revision":3,"pod":"c"},{"revision":2,"pod":"a"},{"revision":1,"pod":"b"}]}}`)
	got := jsonDiff(before, after)
	want := []string{`~ workers/web.pod: "a" -> "c"`, `+ workers/web.revisions[revision=3].pod: "c"`, `+ workers/web.revisions[revision=3].revision: 3`}
	if !slices.Equal(got, want) {
		t.Errorf("diff\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
