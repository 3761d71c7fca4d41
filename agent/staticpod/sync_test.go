// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod_test

import (
	"slices"
	"testing"

	"podmin.dev/podmin/agent/staticpod"
)

// stepRecorder records the steps of passes.
type stepRecorder struct{ steps []staticpod.Step }

func (s *stepRecorder) step(st staticpod.Step, _ string) error {
	s.steps = append(s.steps, st)
	return nil
}

func (s *stepRecorder) count(st staticpod.Step) int {
	n := 0
	for _, x := range s.steps {
		if x == st {
			n++
		}
	}
	return n
}

// TestOneDirectorySyncPerPass: a pass that renames and removes files
// syncs the static Pod directory exactly once, after the last rename and
// removal and before the Services are published; a pass that changes
// nothing does not sync, except the first pass of a new process, which
// makes durable whatever a process that died before its sync renamed.
func TestOneDirectorySyncPerPass(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"a", "b", "c", "d"} {
		f.deploy(t, "workers", name, "img:v1", name == "a")
	}
	rec := &stepRecorder{}
	r := f.reconciler(t, rec.step)
	if res := mustReconcile(t, r); res.Written != 4 {
		t.Fatalf("first pass wrote %d files", res.Written)
	}
	if n := rec.count(staticpod.StepSync); n != 1 {
		t.Fatalf("first pass synced the directory %d times: %q", n, rec.steps)
	}
	if last := slices.Index(rec.steps, staticpod.StepSync); last != len(rec.steps)-2 || rec.steps[last+1] != staticpod.StepPublish ||
		slices.Contains(rec.steps[last:], staticpod.StepRename) {
		t.Fatalf("the sync is not after every rename and before the Services: %q", rec.steps)
	}

	// Two updates and one removal: three changes, one sync.
	f.deploy(t, "workers", "a", "img:v2", true)
	f.deploy(t, "workers", "b", "img:v2", false)
	f.remove(t, "workers", "c")
	rec.steps = nil
	res := mustReconcile(t, r)
	if res.Written != 2 || res.Removed != 1 || rec.count(staticpod.StepRename) != 2 || rec.count(staticpod.StepCleanup) != 1 {
		t.Fatalf("%+v: %q", res, rec.steps)
	}
	if i := slices.Index(rec.steps, staticpod.StepSync); rec.count(staticpod.StepSync) != 1 || i < slices.Index(rec.steps, staticpod.StepCleanup) {
		t.Fatalf("want one sync after the removal: %q", rec.steps)
	}

	// A full pass that changes nothing syncs nothing.
	r.IdentityChanged()
	rec.steps = nil
	if res := mustReconcile(t, r); res.Written != 0 || rec.count(staticpod.StepSync) != 0 {
		t.Fatalf("an unchanged pass: %+v, %q", res, rec.steps)
	}

	// A restarted agent finds every file current, and still syncs once.
	restarted := &stepRecorder{}
	if res := mustReconcile(t, f.reconciler(t, restarted.step)); res.Written != 0 || restarted.count(staticpod.StepSync) != 1 {
		t.Fatalf("first pass of a new process: %+v, %q", res, restarted.steps)
	}
}
