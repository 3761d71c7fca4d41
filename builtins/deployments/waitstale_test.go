// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deployments

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/builtins/manifests"
	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/builtins/openv/openvtest"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// leaderWriter plays the coordination leader of NodeGroup workers on a
// virtual clock that is also the Env's: it keeps the lease live and
// writes the status object from the reports it is given.
type leaderWriter struct {
	t     *testing.T
	store objstore.Store
	now   time.Time
}

func newLeaderWriter(t *testing.T, env *openv.Env, store objstore.Store) *leaderWriter {
	lw := &leaderWriter{t: t, store: store, now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	env.Now = func() time.Time { return lw.now }
	lw.renew()
	return lw
}

// advance moves the clock and renews the lease; the status object stays.
func (l *leaderWriter) advance(d time.Duration) {
	l.now = l.now.Add(d)
	l.renew()
}

func (l *leaderWriter) renew() {
	l.t.Helper()
	lease := fmt.Sprintf(`{"leaderID":"node-0","leaderAddr":"[2001:db8::1]:8081","lastUpdated":%q,"term":3}`, l.now.Format(time.RFC3339Nano))
	if _, err := l.store.Put(context.Background(), state.DNSLeaderPath, []byte(lease)); err != nil {
		l.t.Fatal(err)
	}
}

// revision is the committed revision of workers/name.
func (l *leaderWriter) revision(name string) string {
	l.t.Helper()
	ix, _, err := state.ReadIndex(context.Background(), l.store)
	if err != nil {
		l.t.Fatal(err)
	}
	e, ok := ix.Lookup(state.Key{NodeGroup: "workers", Name: name})
	if !ok {
		l.t.Fatalf("workers/%s is not committed", name)
	}
	return nodepod.Revision(e)
}

// publish writes the status object: one live node per report, reported
// now.
func (l *leaderWriter) publish(reports ...state.DeploymentReport) {
	l.t.Helper()
	n := len(reports)
	s := &state.NodeGroupStatus{NodeGroup: "workers", Leader: "node-0", Term: 3, UpdatedAt: l.now, Settled: true, Expected: &n, Live: n}
	for i, r := range reports {
		r.ReportedAt = l.now
		s.Nodes = append(s.Nodes, state.NodeStatus{Node: fmt.Sprintf("node-%d", i), State: state.NodeLive, Kubelet: true, Deployments: []state.DeploymentReport{r}})
	}
	data, err := s.Encode()
	if err != nil {
		l.t.Fatal(err)
	}
	if _, err := l.store.Put(context.Background(), state.NodeGroupStatusPrefix+"workers.json", data); err != nil {
		l.t.Fatal(err)
	}
}

// ready and failing are reports of revision rev.
func ready(rev string) state.DeploymentReport {
	return state.DeploymentReport{Name: "web", Revision: rev, Desired: rev, Readiness: state.Ready}
}

func failing(rev, kind, msg string) state.DeploymentReport {
	return state.DeploymentReport{Name: "web", Revision: rev, Desired: rev, Readiness: state.NotReady, Reason: msg,
		Error: &state.ReportedError{Kind: kind, Message: msg, Revision: rev}}
}

// TestWaitAfterAFixOutsideThePayload: an error the node reported before
// the wait began (a secret missing, since created; an image since pushed
// again under its tag) does not end status --wait or an unchanged deploy
// --wait at once, nor does the node reporting it again unchanged (a retry
// that failed the same way). It ends it when the node reports another
// error, or when it still stands StaleErrorGrace later; the node
// reporting the revision ready ends the wait successfully.
func TestWaitAfterAFixOutsideThePayload(t *testing.T) {
	for _, tc := range []struct {
		name string
		// next is what the leader publishes at each poll (nil: nothing).
		next    func(lw *leaderWriter, rev string, poll int)
		wantErr bool
		minWait time.Duration
	}{
		{name: "fixed", next: func(lw *leaderWriter, rev string, poll int) {
			if poll == 2 {
				lw.publish(ready(rev))
			}
		}},
		{name: "another error", wantErr: true, next: func(lw *leaderWriter, rev string, poll int) {
			if poll == 2 {
				lw.publish(failing(rev, state.ErrorSecret, "value db-url: access denied"))
			}
		}},
		{name: "reported again unchanged", wantErr: true, minWait: StaleErrorGrace, next: func(lw *leaderWriter, rev string, poll int) {
			lw.publish(failing(rev, state.ErrorSecret, "value db-url: not found"))
		}},
		{name: "still standing", wantErr: true, minWait: StaleErrorGrace, next: func(*leaderWriter, string, int) {}},
	} {
		for _, via := range []string{"status --wait", "deploy --wait"} {
			t.Run(tc.name+"/"+via, func(t *testing.T) {
				env := openvtest.NewEnv(t)
				b := connectedLocal(t, env)
				deployBuiltIn(t, env, "web", "hello:v1")
				lw := newLeaderWriter(t, env, b)
				rev := lw.revision("web")
				lw.publish(failing(rev, state.ErrorSecret, "value db-url: not found"))
				lw.advance(5 * time.Second)
				polls := 0
				env.Sleep = func(ctx context.Context, d time.Duration) error {
					polls++
					lw.advance(d)
					tc.next(lw, rev, polls)
					if polls > 1000 {
						return errors.New("the wait never ended")
					}
					return ctx.Err()
				}
				var w WaitResult
				var err error
				if via == "status --wait" {
					w, err = Wait(t.Context(), env, WaitOptions{Name: "web", NodeGroup: "workers"})
				} else {
					var res DeployResult
					res, err = Deploy(t.Context(), env, DeployOptions{ManifestOptions: manifests.ManifestOptions{Name: "web", NodeGroup: "workers", Images: []string{"hello:v1"}}, Wait: UntilReady})
					if res.Action != "unchanged" || res.Wait == nil {
						t.Fatalf("deploy: %+v, %v", res, err)
					}
					w = *res.Wait
				}
				if tc.wantErr != (err != nil) || err != nil && !errors.Is(err, ErrNodeError) {
					t.Fatalf("after %d polls: %+v, %v", polls, w, err)
				}
				if polls == 0 {
					t.Fatalf("the wait ended on the error reported before it began: %v", err)
				}
				if waited := time.Duration(w.WaitedSeconds * float64(time.Second)); waited < tc.minWait {
					t.Fatalf("the wait ended after %s, before %s", waited, tc.minWait)
				}
			})
		}
	}
}

// TestDeployWaitFailsAtOnceOnItsNewRevision: a revision deploy just
// committed was never reported on before, so a node's error for it ends
// the wait at the first read.
func TestDeployWaitFailsAtOnceOnItsNewRevision(t *testing.T) {
	env := openvtest.NewEnv(t)
	b := connectedLocal(t, env)
	deployBuiltIn(t, env, "web", "hello:v1")
	lw := newLeaderWriter(t, env, b)
	published := false
	env.WrapStore = func(s objstore.Store) objstore.Store {
		return beforeStatusRead{Store: s, hook: func() {
			if !published {
				published = true
				lw.publish(failing(lw.revision("web"), state.ErrorKubelet, "container web: ImagePullBackOff"))
			}
		}}
	}
	env.Sleep = func(context.Context, time.Duration) error { return errors.New("the wait polled again") }
	res, err := Deploy(t.Context(), env, DeployOptions{ManifestOptions: manifests.ManifestOptions{Name: "web", NodeGroup: "workers", Images: []string{"hello:v2"}}, Wait: UntilReady})
	if res.Action != "updated" || !errors.Is(err, ErrNodeError) || !strings.Contains(err.Error(), "ImagePullBackOff") {
		t.Fatalf("deploy --wait of a failing new revision: %+v, %v", res, err)
	}
}

// beforeStatusRead calls hook before every read of a status object.
type beforeStatusRead struct {
	objstore.Store
	hook func()
}

func (s beforeStatusRead) Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	if strings.HasPrefix(key, state.NodeGroupStatusPrefix) {
		s.hook()
	}
	return s.Store.Get(ctx, key, opts)
}

// TestErrorFromBeforeTheNodeKnewTheRevision: an error for the committed
// revision in a report the node made while the index it had read named
// another revision (here: it runs the revision rolled back to, which
// crashed, and has not read the rollback yet) is not an error of the
// commit: status does not call the deployment failed and a wait goes on.
func TestErrorFromBeforeTheNodeKnewTheRevision(t *testing.T) {
	env := openvtest.NewEnv(t)
	b := connectedLocal(t, env)
	deployBuiltIn(t, env, "web", "hello:v1")
	lw := newLeaderWriter(t, env, b)
	rev := lw.revision("web")
	old := failing(rev, state.ErrorKubelet, "container web: CrashLoopBackOff")
	old.Desired = strings.Repeat("0", len(rev)) // the revision the node last read
	lw.publish(old)
	res, err := Status(t.Context(), env, StatusOptions{NodeGroup: "workers", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	d := res.NodeGroups[0].Deployments[0]
	if d.State == StateFailed || len(d.Errors) != 0 {
		t.Fatalf("status counts an error reported before the node read the revision: %+v", d)
	}
}

// TestStatusSaysEachNodeErrorOnce: kubelet's problem is both a node's
// reason and its error; the summary says it once.
func TestStatusSaysEachNodeErrorOnce(t *testing.T) {
	env := openvtest.NewEnv(t)
	b := connectedLocal(t, env)
	deployBuiltIn(t, env, "web", "hello:v1")
	lw := newLeaderWriter(t, env, b)
	rev := lw.revision("web")
	const msg = "container web: CrashLoopBackOff (back-off 40s restarting failed container)"
	lw.publish(ready(rev), failing(rev, state.ErrorKubelet, msg), failing(rev, state.ErrorSecret, "value token: not found"))
	res, err := Status(t.Context(), env, StatusOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := res.NodeGroups[0].Deployments[0]
	if d.State != StateFailed || len(d.Errors) != 2 {
		t.Fatalf("status: %+v", d)
	}
	for _, m := range []string{msg, "value token: not found"} {
		if n := strings.Count(d.Summary, m); n != 1 {
			t.Errorf("the summary says %q %d times: %s", m, n, d.Summary)
		}
	}
	if !strings.Contains(d.Summary, "node-1: kubelet error: "+msg) || !strings.Contains(d.Summary, "3/3 applied, 1/3 ready") {
		t.Errorf("summary %s", d.Summary)
	}
}

// TestKubeletDownIsUnknownNotProgress: a node whose kubelet does not
// answer reports its readiness unknown with the reason; status says so
// (state unknown, the reason in the summary) instead of progress, a wait
// for readiness goes on, and a wait for the revision to be applied ends.
func TestKubeletDownIsUnknownNotProgress(t *testing.T) {
	env := openvtest.NewEnv(t)
	b := connectedLocal(t, env)
	deployBuiltIn(t, env, "web", "hello:v1")
	lw := newLeaderWriter(t, env, b)
	rev := lw.revision("web")
	const why = "kubelet is down: its Pods API does not answer (connection refused): check kubelet on the node (systemctl status kubelet)"
	down := state.DeploymentReport{Name: "web", Revision: rev, Desired: rev, Readiness: state.Unknown, Reason: why}
	lw.publish(ready(rev), down)
	res, err := Status(t.Context(), env, StatusOptions{NodeGroup: "workers", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	d := res.NodeGroups[0].Deployments[0]
	if d.State != StateUnknown || !strings.Contains(d.Summary, "readiness unknown: node-1 ("+why+")") {
		t.Fatalf("status with a kubelet down: %s: %s", d.State, d.Summary)
	}
	applied, err := Wait(t.Context(), env, WaitOptions{NodeGroup: "workers", Name: "web", Until: UntilApplied, Timeout: time.Second})
	if err != nil || applied.Applied != 2 {
		t.Fatalf("wait until applied: %+v, %v", applied, err)
	}
	// The wait's sleeps move the virtual clock (the lease stays live).
	env.Sleep = func(context.Context, time.Duration) error { lw.advance(10 * time.Second); return nil }
	_, err = Wait(t.Context(), env, WaitOptions{NodeGroup: "workers", Name: "web", Until: UntilReady, Timeout: time.Minute, Poll: 10 * time.Second})
	var te *WaitTimeoutError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "kubelet is down") {
		t.Fatalf("wait until ready with a kubelet down: %v, want its timeout naming kubelet", err)
	}
}

// TestStatusNamesMissingNodes: a node the leader no longer hears from is
// named in the summary, not only counted.
func TestStatusNamesMissingNodes(t *testing.T) {
	env := openvtest.NewEnv(t)
	b := connectedLocal(t, env)
	deployBuiltIn(t, env, "web", "hello:v1")
	lw := newLeaderWriter(t, env, b)
	rev := lw.revision("web")
	expected := 3
	r := ready(rev)
	r.ReportedAt = lw.now
	s := &state.NodeGroupStatus{NodeGroup: "workers", Leader: "node-0", Term: 3, UpdatedAt: lw.now, Settled: true, Expected: &expected, Live: 2, Missing: 1,
		Nodes: []state.NodeStatus{
			{Node: "node-0", State: state.NodeLive, Kubelet: true, Deployments: []state.DeploymentReport{r}},
			{Node: "node-1", State: state.NodeLive, Kubelet: true, Deployments: []state.DeploymentReport{r}},
			{Node: "node-2", State: state.NodeMissing},
		}}
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(t.Context(), state.NodeGroupStatusPrefix+"workers.json", data); err != nil {
		t.Fatal(err)
	}
	res, err := Status(t.Context(), env, StatusOptions{NodeGroup: "workers", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if d := res.NodeGroups[0].Deployments[0]; !strings.Contains(d.Summary, "1 node(s) missing (3 expected, 2 live): node-2 no longer heard from") {
		t.Fatalf("summary %q does not name the missing node", d.Summary)
	}
}
