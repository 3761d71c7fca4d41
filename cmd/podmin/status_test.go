// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/state"
)

// fakeLeader writes what a coordination leader publishes: a live lease and
// NodeGroup workers' status object, every one of its nodes reporting
// deployment web's committed revision with the given readiness (and
// error kind, when set).
type fakeLeader struct {
	t     *testing.T
	store objstore.Store
}

func newFakeLeader(c *cli) *fakeLeader {
	return newFakeLeaderAt(c.t, filepath.Join(c.root, "data", "podmin", "buckets", "demo-bucket"))
}

// newFakeLeaderAt is a fake leader of the local bucket at dir.
func newFakeLeaderAt(t *testing.T, dir string) *fakeLeader {
	return &fakeLeader{t: t, store: localstore.Open(dir)}
}

func (f *fakeLeader) revision() string {
	f.t.Helper()
	rev, err := f.committed()
	if err != nil {
		f.t.Fatal(err)
	}
	return rev
}

// committed is the revision of workers/web in the index.
func (f *fakeLeader) committed() (string, error) {
	ix, _, err := state.ReadIndex(context.Background(), f.store)
	if err != nil {
		return "", err
	}
	e, ok := ix.Lookup(state.Key{NodeGroup: "workers", Name: "web"})
	if !ok {
		return "", fmt.Errorf("workers/web is not committed")
	}
	return nodepod.Revision(e), nil
}

func (f *fakeLeader) publish(nodes, expected int, readiness, errKind string) {
	f.t.Helper()
	if err := f.tryPublish(nodes, expected, readiness, errKind); err != nil {
		f.t.Fatal(err)
	}
}

// follow publishes every new revision of workers/web ready on 3 of 3
// nodes, as a leader would once kubelet reports it, until stop is called.
func (f *fakeLeader) follow() (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		last := ""
		for {
			if rev, err := f.committed(); err == nil && rev != last && f.tryPublish(3, 3, state.Ready, "") == nil {
				last = rev
			}
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// keepFailing publishes, until stop is called, the node error errKind
// for the committed revision again and again, each time as a new report
// whose message moves on as kubelet's does (its back-off grows): an error
// the node reports after a wait began, which ends the wait.
func (f *fakeLeader) keepFailing(errKind string) (stop func()) {
	// The first report is there before anything reads the status.
	f.publish(3, 3, state.NotReady, errKind)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 1; ; i++ {
			_ = f.tryPublishReason(3, 3, state.NotReady, errKind, fmt.Sprintf("container web: CrashLoopBackOff (back-off %ds restarting failed container)", 10*i))
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); <-stopped }
}

func (f *fakeLeader) tryPublish(nodes, expected int, readiness, errKind string) error {
	return f.tryPublishReason(nodes, expected, readiness, errKind, "container web: CrashLoopBackOff")
}

// tryPublishReason is tryPublish with the failing node's reason.
func (f *fakeLeader) tryPublishReason(nodes, expected int, readiness, errKind, reason string) error {
	ctx := context.Background()
	now := time.Now().UTC()
	lease := fmt.Sprintf(`{"leaderID":"node-0","leaderAddr":"[2001:db8::1]:8081","lastUpdated":%q,"term":3}`, now.Format(time.RFC3339Nano))
	if _, err := f.store.Put(ctx, state.DNSLeaderPath, []byte(lease)); err != nil {
		return err
	}
	rev, err := f.committed()
	if err != nil {
		return err
	}
	s := &state.NodeGroupStatus{NodeGroup: "workers", Leader: "node-0", Term: 3, UpdatedAt: now, Settled: true, Expected: &expected, Live: nodes, Missing: max(0, expected-nodes)}
	for i := range nodes {
		r := state.DeploymentReport{Name: "web", Revision: rev, AppliedAt: &now, Desired: rev, Readiness: readiness, ReportedAt: now}
		if errKind != "" && i == 1 {
			// As an agent reports kubelet's problem: the reason and the error.
			r.Reason = reason
			r.Error = &state.ReportedError{Kind: errKind, Message: r.Reason, Revision: rev}
		}
		s.Nodes = append(s.Nodes, state.NodeStatus{Node: fmt.Sprintf("node-%d", i), State: state.NodeLive, Kubelet: true, Deployments: []state.DeploymentReport{r}})
	}
	data, err := s.Encode()
	if err != nil {
		return err
	}
	_, err = f.store.Put(ctx, "status/nodegroups/workers.json", data)
	return err
}

// podmin status reports and exits 0 whatever the state; with --wait it is
// a gate: 124 on timeout naming what is missing, 1 on a node's error.
func TestStatusCommand(t *testing.T) {
	c := newCLI(t)
	c.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket")
	if out := c.ok("status"); !strings.Contains(out, "no deployments committed") {
		t.Fatalf("status without deployments:\n%s", out)
	}
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")

	// No agent takes part in coordination: unknown, exit 0.
	out := c.ok("status")
	if !strings.Contains(out, "workers    web   ") || !strings.Contains(out, "unknown") || !strings.Contains(out, "no agent takes part in coordination yet") {
		t.Fatalf("status before any agent:\n%s", out)
	}

	// Every node ready.
	f := newFakeLeader(c)
	f.publish(3, 3, state.Ready, "")
	var res struct {
		Leader struct {
			ID   string
			Live bool
		}
		NodeGroups []struct {
			NodeGroup   string
			Expected    int
			Deployments []struct {
				Name, Revision, State string
				Applied, Ready, Total int
				Errors                []struct{ Node, Kind string }
				Nodes                 []struct{ Node, Readiness string }
				OldestReport          *time.Time
			}
		}
	}
	if err := json.Unmarshal([]byte(c.ok("status", "web", "-g", "workers", "-o", "json")), &res); err != nil {
		t.Fatal(err)
	}
	d := res.NodeGroups[0].Deployments[0]
	if !res.Leader.Live || res.Leader.ID != "node-0" || res.NodeGroups[0].Expected != 3 || d.State != "ready" || d.Ready != 3 ||
		d.Total != 3 || d.Revision != f.revision() || len(d.Nodes) != 3 || d.OldestReport == nil {
		t.Fatalf("status -o json: %+v", res)
	}
	c.ok("status", "web", "-g", "workers", "--wait", "--timeout", "30s")
	if out := c.ok("status", "-o", "yaml"); !strings.Contains(out, "state: ready") {
		t.Fatalf("status -o yaml:\n%s", out)
	}

	// Not ready: status reports (exit 0), --wait times out naming what is
	// missing, --wait=applied is satisfied.
	f.publish(3, 3, state.NotReady, "")
	if out := c.ok("status", "-g", "workers"); !strings.Contains(out, "progressing") || !strings.Contains(out, "3/3 applied, 0/3 ready") {
		t.Fatalf("status while not ready:\n%s", out)
	}
	c.ok("status", "web", "-g", "workers", "--wait=applied", "--timeout", "30s")
	c.fails(exitDeadline, "waiting for workers/web revision "+f.revision()[:12]+" to be ready: 3/3 applied, 0/3 ready", "status", "web", "-g", "workers", "--wait", "--timeout", "2s")

	// A missing node keeps --wait=applied from ending.
	f.publish(2, 3, state.Ready, "")
	c.fails(exitDeadline, "1 node(s) missing (3 expected, 2 live)", "status", "web", "-g", "workers", "--wait=applied", "--timeout", "2s")

	// An error reported before the wait began may be one just fixed
	// outside the payloads: it does not end the wait at once, and the
	// nodes reporting the revision ready end it successfully.
	f.publish(3, 3, state.NotReady, "kubelet")
	if out := c.ok("status", "-g", "workers"); strings.Count(out, "container web: CrashLoopBackOff") != 1 {
		t.Fatalf("status names the node's error other than once:\n%s", out)
	}
	stop := f.follow()
	c.ok("status", "web", "-g", "workers", "--wait", "--timeout", "30s")
	stop()
	// A node error reported after the wait began fails the gate, and
	// deploy --wait (the deployment stays committed).
	stop = f.keepFailing("kubelet")
	c.fails(exitFailed, "a node reports an error for the revision: workers/web revision "+f.revision()[:12]+": node-1 (kubelet): container web: CrashLoopBackOff", "status", "web", "-g", "workers", "--wait", "--timeout", "30s")
	c.fails(exitFailed, "workers/web unchanged (revision "+f.revision()[:12]+" committed), but the wait failed: a node reports an error", "deploy", "web", "-g", "workers", "--image", "hello:v1", "--wait", "--timeout", "30s")
	stop()
	f.publish(3, 3, state.Ready, "")
	out = c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1", "--wait")
	if !strings.Contains(out, "workers/web revision "+f.revision()[:12]+" ready on 3/3 nodes after") {
		t.Fatalf("deploy --wait:\n%s", out)
	}

	// Usage and absence.
	c.fails(exitUsage, "a deployment name needs its NodeGroup: pass -g NODEGROUP", "status", "web")
	c.fails(exitUsage, `unknown wait goal "soon": use one of applied or ready`, "status", "web", "-g", "workers", "--wait=soon")
	c.fails(exitUsage, `unknown wait goal "soon"`, "deploy", "web", "-g", "workers", "--image", "hello:v1", "--wait=soon")
	c.fails(exitNotFound, "deployment workers/api is not in the deployment index", "status", "api", "-g", "workers")
}
