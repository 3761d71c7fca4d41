// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/state"
)

// On a local bucket a commit reaches the static Pod directory through the
// change notification, long before the (here: hour-long) poll would.
func TestLocalCommitsPropagateByNotification(t *testing.T) {
	a := startLocalAgent(t, time.Hour)
	// The first commit creates deployments/: the watcher moves from the
	// bucket directory to it.
	for i := 1; i <= 5; i++ {
		commit(t, a.bucket, "web", fmt.Sprintf("hello:v%d", i), false)
		waitFor(t, 20*time.Second, fmt.Sprintf("commit %d", i), func() bool {
			return fileContains(filepath.Join(a.manifests, "web.yaml"), fmt.Sprintf("hello:v%d", i))
		})
	}
}

// The readiness detail names a Pod kept at its last valid state, /metrics
// counts it, and the rest of the NodeGroup is published; a missing bucket
// is reported with its reason and nothing is removed; both recover.
func TestReadinessAndMetricsReportFailures(t *testing.T) {
	a := startLocalAgent(t, 20*time.Millisecond)
	commit(t, a.bucket, "web", "web:v1", true)
	waitFor(t, 20*time.Second, "ready", func() bool { code, _ := a.get(t, "/readyz"); return code == 200 })

	commitMissing(t, a.bucket, "gone", "gone:v1")
	commit(t, a.bucket, "api", "api:v1", false)
	waitFor(t, 20*time.Second, "api published beside the failing gone", func() bool {
		return fileContains(filepath.Join(a.manifests, "api.yaml"), "api:v1")
	})
	waitFor(t, 20*time.Second, "readiness names gone", func() bool {
		code, body := a.get(t, "/readyz")
		return code == 503 && strings.Contains(body, "pod gone (deployment workers/gone)")
	})
	metric := regexp.MustCompile(`(?m)^podmin_agent_pod_failures_total\{nodegroup="workers",pod="gone"\} [1-9][0-9]*$`)
	if _, body := a.get(t, "/metrics"); !metric.MatchString(body) || !strings.Contains(body, `podmin_agent_reconcile_passes_total{nodegroup="workers"}`) {
		t.Fatalf("/metrics:\n%s", body)
	}
	if !strings.Contains(a.logs.String(), "level=WARN msg=\"Pod kept at its last valid state\"") {
		t.Fatalf("no WARN for the failing Pod:\n%s", a.logs)
	}
	// An identical deploy trusts what the index references; deleting
	// the entry and deploying again rewrites the payload.
	if _, err := state.NewCommitter(a.bucket, state.CommitOptions{}).Delete(context.Background(), state.Key{NodeGroup: "workers", Name: "gone"}); err != nil {
		t.Fatal(err)
	}
	commit(t, a.bucket, "gone", "gone:v1", false)
	waitFor(t, 20*time.Second, "ready after repair", func() bool {
		code, _ := a.get(t, "/readyz")
		return code == 200 && fileContains(filepath.Join(a.manifests, "gone.yaml"), "gone:v1")
	})
	if !fileContains(filepath.Join(a.manifests, "gone.yaml"), "gone:v1") {
		t.Fatal("gone.yaml not published after repair")
	}

	// The bucket disappears: unready with the reason, every file kept.
	moved := a.bucket.Dir() + ".away"
	if err := os.Rename(a.bucket.Dir(), moved); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "unready naming the bucket", func() bool {
		code, body := a.get(t, "/readyz")
		return code == 503 && strings.Contains(body, "the cluster bucket does not exist")
	})
	entries, _ := os.ReadDir(a.manifests)
	if len(entries) != 3 {
		t.Fatalf("files with the bucket missing: %v", entries)
	}
	if err := os.Rename(moved, a.bucket.Dir()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "ready after the bucket returned", func() bool { code, _ := a.get(t, "/readyz"); return code == 200 })
}

// A storm of commits during a cold start converges to the last commit
// without an ERROR log, and readiness is never lost once gained.
func TestCommitStormDuringColdStart(t *testing.T) {
	// Staging takes a few milliseconds, so commits land mid-pass.
	a := startLocalAgent(t, 50*time.Millisecond, func(o *Options) {
		o.Step = func(s staticpod.Step, _ string) error {
			if s == staticpod.StepStaged {
				time.Sleep(3 * time.Millisecond)
			}
			return nil
		}
	})
	var lost atomic.Bool
	var ready atomic.Bool
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			default:
			}
			code, _ := a.get(t, "/readyz")
			if code == 200 {
				ready.Store(true)
			} else if ready.Load() {
				lost.Store(true)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	const commits = 60
	for i := 1; i <= commits; i++ {
		commit(t, a.bucket, fmt.Sprintf("app-%d", i%6), fmt.Sprintf("app:v%d", i), i%2 == 0)
		time.Sleep(time.Duration(i%3) * time.Millisecond)
	}
	waitFor(t, 30*time.Second, "converged", func() bool {
		return fileContains(filepath.Join(a.manifests, fmt.Sprintf("app-%d.yaml", commits%6)), fmt.Sprintf("app:v%d", commits))
	})
	waitFor(t, 20*time.Second, "ready", func() bool { return ready.Load() })
	close(stop)
	<-watched
	if lost.Load() {
		t.Fatal("readiness was lost during the commit storm")
	}
	if logs := a.logs.String(); strings.Contains(logs, "level=ERROR") {
		t.Fatalf("ERROR logged during the commit storm:\n%s", logs)
	}
	restarts := strings.Count(a.logs.String(), "index changed during the pass: restarting")
	if restarts == 0 {
		t.Fatal("no pass was restarted: the storm did not exercise a changed index")
	}
	t.Logf("passes restarted by a changed index: %d", restarts)
}
