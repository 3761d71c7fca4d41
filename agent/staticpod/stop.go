// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"
)

// Stopper tells when the container runtime no longer runs a Pod.
//
// Kubelet runs one static Pod of a name at a time: a file whose bytes
// change is a new Pod to it, which it starts only once the old one has
// stopped, and a new Pod that arrives while the old one is still stopping
// waits for kubelet's fixed back-off (10 s) before it is tried again. A
// reconciler with a Stopper therefore replaces a Pod's file in two steps:
// it removes the old file, waits until the old Pod no longer runs, and
// only then renames the new file into place. A Pod deployed again soon
// after its deletion waits the same way for the deleted one to stop.
type Stopper interface {
	// CanTell reports whether the runtime can be asked at all. Without
	// it a file is replaced in one rename, as it is without a Stopper.
	CanTell() bool
	// WaitStopped returns nil once no running sandbox of the Pod
	// namespace/name at revision remains, and an error when ctx ends or
	// the runtime cannot tell (ErrNoRuntime without one).
	WaitStopped(ctx context.Context, namespace, name, revision string) error
}

// DefaultStopTimeout bounds the wait for replaced Pods to stop: their
// grace period (30 s unless the Pod says otherwise) and a margin. After it
// the new files are written anyway, and kubelet starts them after the old
// Pods stop, as it would have without the wait.
const DefaultStopTimeout = 45 * time.Second

// DefaultStopSettle is the pause after the old Pods stopped, in which
// kubelet finishes them (their volumes, their status) and lets go of the
// name.
const DefaultStopSettle = time.Second

// stopReplaced removes the live files that files replace and waits, for
// all of them at once, until the runtime no longer runs the Pods they
// described, so that their new files are started at once. A file that
// cannot be removed is simply replaced by its rename. It returns when the
// Pods stopped, after the stop timeout, or when ctx ends, with the files
// whose old file it removed: those are renamed even when ctx ended, so
// that no Pod is left without a file.
func (r *Reconciler) stopReplaced(ctx context.Context, files []*pendingFile) map[*pendingFile]bool {
	if r.opts.Stopper == nil || !r.opts.Stopper.CanTell() {
		return nil
	}
	removed := map[*pendingFile]bool{}
	type replaced struct{ namespace, name, revision string }
	var stops []replaced
	for _, pf := range files {
		if pf.err != nil {
			continue
		}
		p := pf.pod.pod
		name := pf.pod.target
		cur, _ := r.readPodFile(name)
		rev := cur.revision
		if rev == "" {
			if d, ok := r.deleted[name]; ok {
				// A Pod of this name was deleted (or retired) by an
				// earlier pass and may still be stopping: kubelet would
				// hold the new one back for its back-off.
				delete(r.deleted, name)
				r.log.Info("waiting for the deleted Pod of the same name to stop before its new file", "deployment", p.Key.String(),
					"pod", name, "deleted", d.revision, "revision", p.Revision)
				stops = append(stops, replaced{p.Namespace, name, d.revision})
			}
			continue
		}
		if rev == p.Revision {
			// A change within one revision (a renewed identity):
			// replaced in place.
			continue
		}
		if err := os.Remove(pf.dst); err != nil {
			continue
		}
		r.unsynced = true
		removed[pf] = true
		r.log.Info("static Pod file removed so that kubelet stops the running revision first",
			"deployment", p.Key.String(), "file", p.File, "running", rev, "revision", p.Revision)
		stops = append(stops, replaced{p.Namespace, name, rev})
	}
	if len(stops) == 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, r.stopTimeout())
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	stopped := make([]error, len(stops))
	for i, s := range stops {
		wg.Go(func() { stopped[i] = r.opts.Stopper.WaitStopped(wctx, s.namespace, s.name, s.revision) })
	}
	wg.Wait()
	settle := r.opts.StopSettle
	if settle == 0 {
		settle = DefaultStopSettle
	}
	waited := false
	for i, err := range stopped {
		switch {
		case err == nil:
			waited = true
		case errors.Is(err, ErrNoRuntime), ctx.Err() != nil:
		default:
			r.log.Warn("could not see the running revision stop: writing its replacement anyway",
				"pod", stops[i].name, "revision", stops[i].revision, "after", time.Since(start).Round(time.Millisecond), "err", err)
		}
	}
	if waited && settle > 0 {
		t := time.NewTimer(settle)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return removed
}

// stopTimeout bounds the wait for replaced Pods to stop.
func (r *Reconciler) stopTimeout() time.Duration {
	if r.opts.StopTimeout > 0 {
		return r.opts.StopTimeout
	}
	return DefaultStopTimeout
}
