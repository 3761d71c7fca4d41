// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/internal/clock/fakeclock"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// longLease keeps one leader for a whole test on a fake clock: its hold
// outlasts anything a test advances, so no renewal has to run.
var longLease = election.Timing{Renew: time.Hour, Timeout: 3 * time.Hour, Hold: 2 * time.Hour, Retry: time.Second}

const (
	slotRetention = 30 * time.Second
	slotDrain     = 5 * time.Second
)

// slotLeader is one coordinator leading on a fake clock, with the other
// nodes of NodeGroup workers played through its API backend methods, as
// their agents would call them over mTLS.
type slotLeader struct {
	t     *testing.T
	c     *localCluster
	clock *fakeclock.Clock
	store objstore.Store
	a     *localAgent
	// r0 and r1 are the running and the committed revision of
	// workers/web; freed counts the leader's OnSlotFreed calls.
	r0, r1 string
	freed  atomic.Int32
}

// newSlotLeader commits workers/web at two revisions, publishes the
// NodeGroup's size (size 0: none) and starts the leader. Unless inGroup,
// the leader is of NodeGroup control, so that only the played nodes
// count in workers' rollout.
func newSlotLeader(t *testing.T, size int, inGroup bool, tweak func(*coordinator.Options)) *slotLeader {
	t.Helper()
	return newSlotLeaderWith(t, size, inGroup, tweak, commitWeb)
}

// newSlotLeaderWith is newSlotLeader with the revisions committed by
// commit.
func newSlotLeaderWith(t *testing.T, size int, inGroup bool, tweak func(*coordinator.Options), commit func(*testing.T, objstore.Store, string) state.Entry) *slotLeader {
	t.Helper()
	s := &slotLeader{t: t, clock: fakeclock.New(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)), store: newBucket(t)}
	if size > 0 {
		tfvars := `{"cluster":"local","nodegroups":[{"name":"workers","size":` + string(rune('0'+size)) + `}]}`
		if _, err := s.store.Put(t.Context(), state.TFVarsPath, []byte(tfvars)); err != nil {
			t.Fatal(err)
		}
	}
	s.r0 = nodepod.Revision(commit(t, s.store, "hello:v1"))
	s.r1 = nodepod.Revision(commit(t, s.store, "hello:v2"))
	s.c = newLocalCluster(t, longLease, slotRetention, inNodeGroup("workers", web))
	s.c.tweak = func(o *coordinator.Options) {
		o.Clock, o.Drain = s.clock, slotDrain
		o.OnSlotFreed = func() { s.freed.Add(1) }
		if tweak != nil {
			tweak(o)
		}
	}
	spec := s.c.spec(9, s.store)
	if !inGroup {
		spec.nodegroup = "control"
	}
	s.a = s.c.start(t, spec)
	eventually(t, 10*time.Second, "the leader leads and wrote its first snapshot", func() bool {
		st, err := coordinator.LoadDurable(context.Background(), s.store)
		return s.a.coord.Elector().IsLeader() && err == nil && st.GetLeaderId() == spec.id
	})
	if size > 0 {
		// The leader reads the NodeGroup sizes when it starts publishing
		// status: wait until it counts workers' expected nodes.
		eventually(t, 10*time.Second, "the NodeGroup size read", func() bool {
			st := readStatus(t, s.store)
			return st != nil && st.Expected != nil && *st.Expected == size
		})
	}
	return s
}

// node is played node i of workers (node-<i>).
func (s *slotLeader) node(i int) api.Node {
	spec := s.c.spec(i, nil)
	return api.Node{ID: spec.id, NodeGroup: "workers", Addr: spec.addr, PodPrefix: spec.prefix}
}

// endpoint is node i's web endpoint.
func (s *slotLeader) endpoint(i int) api.Endpoint {
	return api.Endpoint{Namespace: web.Namespace, Service: web.Name, Addr: s.node(i).PodPrefix.Addr().Next()}
}

// join registers node i (Hello), reports its web endpoint and its
// deployment report.
func (s *slotLeader) join(i int, d *pb.DeploymentReport) api.Node {
	s.t.Helper()
	n := s.node(i)
	if err := s.a.coord.Register(context.Background(), n); err != nil {
		s.t.Fatal(err)
	}
	if _, _, err := s.a.coord.Report(context.Background(), n, []api.Endpoint{s.endpoint(i)}); err != nil {
		s.t.Fatal(err)
	}
	s.report(i, d)
	return n
}

// report sends node i's report of web (nil: no deployment).
func (s *slotLeader) report(i int, d *pb.DeploymentReport) {
	s.t.Helper()
	r := &pb.StatusReport{Kubelet: true}
	if d != nil {
		d.Name = "web"
		r.Deployments = []*pb.DeploymentReport{d}
	}
	if err := s.a.coord.ReportStatus(context.Background(), s.node(i), r); err != nil {
		s.t.Fatal(err)
	}
}

// ready is a report of web running r0, ready, while r1 is committed.
func (s *slotLeader) ready() *pb.DeploymentReport {
	return &pb.DeploymentReport{Revision: s.r0, Desired: s.r1, Readiness: pb.Readiness_READINESS_READY}
}

func (s *slotLeader) with(d *pb.DeploymentReport, readiness pb.Readiness, reason string) *pb.DeploymentReport {
	d.Readiness, d.Reason = readiness, reason
	return d
}

// ask is node i's request for a slot for r1, keeping no endpoint.
func (s *slotLeader) ask(i int) *pb.SlotResponse {
	s.t.Helper()
	resp, err := s.a.coord.AcquireSlot(context.Background(), s.node(i), &pb.SlotRequest{Deployment: "web", Revision: s.r1}, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp
}

func (s *slotLeader) wantGranted(i int, what string) *pb.SlotResponse {
	s.t.Helper()
	resp := s.ask(i)
	if !resp.GetGranted() {
		s.t.Fatalf("%s: node-%d refused: %s", what, i, resp.GetReason())
	}
	return resp
}

func (s *slotLeader) wantRefused(i int, what, reason string) {
	s.t.Helper()
	resp := s.ask(i)
	if resp.GetGranted() || !strings.Contains(resp.GetReason(), reason) {
		s.t.Fatalf("%s: node-%d granted %v (%q), want refused naming %q", what, i, resp.GetGranted(), resp.GetReason(), reason)
	}
}

// A node missing from the NodeGroup (3 configured, 2 live) counts against
// maxUnavailable 1: no slot until it is back.
func TestMissingNodeCountsAgainstMaxUnavailable(t *testing.T) {
	s := newSlotLeader(t, 3, false, nil)
	s.join(0, s.ready())
	s.join(1, s.ready())
	s.wantRefused(0, "one of three nodes missing", "1 node(s) missing (3 expected, 2 live)")
	s.join(2, s.ready())
	s.wantGranted(0, "all three nodes live and ready")
}

// A node whose kubelet stopped answering (readiness unknown) counts
// against maxUnavailable: nobody can tell whether its Pod serves.
func TestKubeletDownCountsAgainstMaxUnavailable(t *testing.T) {
	s := newSlotLeader(t, 2, false, nil)
	s.join(0, s.ready())
	s.join(1, s.with(s.ready(), pb.Readiness_READINESS_UNKNOWN, "kubelet is down: its Pods API does not answer"))
	s.wantRefused(0, "the other node's kubelet is down", "node-1 is of unknown readiness: kubelet is down")
	s.report(1, s.ready())
	s.wantGranted(0, "the other node's kubelet answers again")
}

// A node whose Pod is known broken (kubelet reports it not ready) gets a
// slot at once, even while another node holds the only one: replacing
// what serves nothing costs nothing.
func TestBrokenNodeGetsASlotAtOnce(t *testing.T) {
	s := newSlotLeader(t, 2, false, nil)
	s.join(0, s.ready())
	s.join(1, s.ready())
	s.wantGranted(1, "the first node")
	s.report(0, s.with(s.ready(), pb.Readiness_READINESS_NOT_READY, "kubelet reports the Pod not ready"))
	s.wantGranted(0, "a broken node while the other updates")
}

// A node that has not reported since its agent (re)started, or whose
// kubelet has not listed its Pods since, is not broken: it only counts as
// unavailable, so a restarted waiting node's agent never takes a second
// slot.
func TestUnreportedNodeIsNotBroken(t *testing.T) {
	s := newSlotLeader(t, 3, false, nil)
	s.join(0, s.ready())
	s.join(1, s.ready())
	s.join(2, s.ready())
	s.wantGranted(1, "the first node")
	// node-2's agent restarts: its first report is from before its
	// kubelet listed the Pods.
	s.report(2, s.with(s.ready(), pb.Readiness_READINESS_UNKNOWN, "kubelet's Pods API has not listed the Pods yet"))
	s.wantRefused(2, "a restarted waiting node, readiness unknown", "node-1 is updating to")
	// Before its first report, too (a report without the deployment).
	s.report(2, nil)
	s.wantRefused(2, "a restarted waiting node without a report", "node-1 is updating to")
	// node-1's agent restarts while it holds the slot: asking again keeps
	// the one slot it has.
	s.report(1, s.with(s.ready(), pb.Readiness_READINESS_UNKNOWN, "kubelet's Pods API has not listed the Pods yet"))
	s.wantGranted(1, "the holder asks again after a restart")
	st := readStatusWhen(t, s.store, func(st *state.NodeGroupStatus) bool { return len(st.Rollouts) == 1 })
	if got := st.Rollouts[0].Updating; len(got) != 1 || got[0] != "node-1" {
		t.Fatalf("updating %v, want [node-1]", got)
	}
}

// A node registered with a leader that has no report from it (the leader
// just started) counts as unavailable, not as broken.
func TestNodeWithoutReportCountsAsUnavailable(t *testing.T) {
	s := newSlotLeader(t, 2, false, nil)
	n := s.node(1)
	if err := s.a.coord.Register(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	s.join(0, s.ready())
	s.wantRefused(0, "the other node has not reported", "node-1 has not reported its Pods to this leader yet")
	s.report(1, s.ready())
	s.wantGranted(0, "once the other node reported")
}

// A node that left keeps no slot past its lease: once its registration
// lapsed, the next node gets the slot.
func TestLeftNodeKeepsNoSlotPastItsLease(t *testing.T) {
	s := newSlotLeader(t, 0, false, nil)
	s.join(0, s.ready())
	s.join(1, s.ready())
	s.wantGranted(1, "the first node")
	s.wantRefused(0, "while node-1 holds the slot", "node-1 is updating to")
	readStatusWhen(t, s.store, func(st *state.NodeGroupStatus) bool {
		return len(st.Rollouts) == 1 && slices.Equal(st.Rollouts[0].Updating, []string{"node-1"})
	})
	// node-1 goes; node-0 keeps reporting.
	for range 4 {
		s.clock.Advance(slotRetention / 4)
		s.report(0, s.ready())
	}
	s.clock.Advance(time.Second)
	s.report(0, s.ready())
	readStatusWhen(t, s.store, func(st *state.NodeGroupStatus) bool {
		for _, r := range st.Rollouts {
			if slices.Contains(r.Updating, "node-1") {
				return false
			}
		}
		return true
	})
	s.wantGranted(0, "after node-1's lease lapsed")
}

// When the node holding an earlier leader's slot reports its new Pod
// ready, the nodes waiting for a slot are told at once (a new leader has
// no record of that slot to free), so a rollout resumes as soon as the
// live nodes have reported, not at their next safety poll.
func TestWaitingNodesAskAgainWhenAnEarlierLeadersSlotFrees(t *testing.T) {
	s := newSlotLeader(t, 0, false, nil)
	s.join(0, &pb.DeploymentReport{Revision: s.r0, Desired: s.r1, Readiness: pb.Readiness_READINESS_READY, Granted: s.r1})
	w := s.ready()
	w.Waiting = "maxUnavailable 1 allows 1 of 2 node(s) of workers to be unavailable at once"
	s.join(1, w)
	before := s.freed.Load()
	s.report(0, &pb.DeploymentReport{Revision: s.r1, Desired: s.r1, Readiness: pb.Readiness_READINESS_READY})
	if s.freed.Load() == before {
		t.Fatal("the earlier leader's slot freed, and the waiting nodes were not told")
	}
}

// readStatusWhen waits for the NodeGroup status object to satisfy ok.
func readStatusWhen(t *testing.T, store objstore.Store, ok func(*state.NodeGroupStatus) bool) *state.NodeGroupStatus {
	t.Helper()
	var st *state.NodeGroupStatus
	eventually(t, 10*time.Second, "the status object", func() bool {
		st = readStatus(t, store)
		return st != nil && ok(st)
	})
	return st
}
