// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"podmin.dev/podmin/agent/api"
	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/pods"
	"podmin.dev/podmin/agent/staticpod"
)

// nodeSide is what this node reports about its NodeGroup's deployments
// and the rollout slots it holds. It is guarded by the Coordinator's mu.
type nodeSide struct {
	// sendMu orders endpoint reports and slot requests: a report of the
	// endpoints read before a slot withdrew some never reaches the leader
	// after the slot's request.
	sendMu sync.Mutex
	// deployments are the reconciler's last states.
	deployments []staticpod.DeploymentState
	// podsSeen is set once kubelet listed its Pods; kubeletLost says why
	// kubelet stopped answering since.
	podsSeen    bool
	kubeletLost string
	// findings say why Pods kubelet reports not ready are not, by UID, as
	// the node diagnosed them (PodFindings).
	findings map[types.UID]string
	// withdrawn maps a Service whose Pod is being replaced to the
	// revision that must be ready before its endpoints come back.
	withdrawn map[ServiceID]string
	// retiring maps a Service to the old Pod of a maxSurge update whose
	// endpoints this node leaves out while it retires (surge.go);
	// retireWaits are the retirements waiting for the Pod that stays to
	// be ready, by deployment.
	retiring    map[ServiceID]retired
	retireWaits map[string]staticpod.Update
	// granted maps a deployment to the revision of a slot this node holds
	// and has not applied yet.
	granted map[string]string
	// leaderless is when a deployment's update (name@revision) first
	// found no leader to ask.
	leaderless map[string]time.Time
	// report is the current report; sent the last one a leader accepted.
	report *pb.StatusReport
	// readySeen is when this node first saw each ready Pod (by UID and
	// restarts) ready: where the hold counts from when kubelet gives no
	// time, or when it is later than kubelet's whole-second time.
	readySeen map[readyKey]time.Time
	// holdEnds is the earliest end of a readiness hold the current report
	// waits for; zero when none.
	holdEnds time.Time
	// endpointsSet is set once SetEndpoints gave this node's endpoints:
	// they are known without a kubelet's word (localKnown).
	endpointsSet bool
	// waits are the rollout slots this node holds and has not used yet,
	// by deployment (slotwait.go); askAt is when the Gate wants to be
	// asked again (zero: no wish).
	waits map[string]*slotWait
	askAt time.Time
	// applied is the snapshot this node's Service DNS and dataplane hold
	// (appliedSet once one is), confirmed to the leader (withdraw.go).
	applied    api.Position
	appliedSet bool
	// refused says why the leader refused this node ("" when it did not).
	refused string
}

// readyKey names one run of a Pod: a restart starts another.
type readyKey struct {
	uid      types.UID
	restarts int
}

// ProbelessHold is how long kubelet must have reported a Pod ready before
// a node reports it ready, when a container of the Pod has no readiness
// probe: kubelet reports such a container ready as soon as it starts, so a
// container that exits within a second would otherwise pass. A Pod whose
// containers all have a readiness probe is ready when kubelet says so.
const ProbelessHold = 5 * time.Second

func newNodeSide() nodeSide {
	return nodeSide{withdrawn: map[ServiceID]string{}, granted: map[string]string{}, leaderless: map[string]time.Time{},
		readySeen: map[readyKey]time.Time{}, waits: map[string]*slotWait{}, retiring: map[ServiceID]retired{},
		retireWaits: map[string]staticpod.Update{}}
}

// seeReady records when this node first saw each of podList ready and
// forgets the rest. Called with c.mu held.
func (c *Coordinator) seeReady(podList []*corev1.Pod) {
	now := c.clock.Now()
	live := map[readyKey]bool{}
	for _, p := range podList {
		if !pods.IsReady(p) {
			continue
		}
		k := readyKey{p.UID, pods.StateOf(p).Restarts}
		live[k] = true
		if _, ok := c.node.readySeen[k]; !ok {
			c.node.readySeen[k] = now
		}
	}
	maps.DeleteFunc(c.node.readySeen, func(k readyKey, _ time.Time) bool { return !live[k] })
}

// DeploymentsChanged takes the reconciler's deployment states after each
// pass that read the index (staticpod Hooks.Deployments).
func (c *Coordinator) DeploymentsChanged(states []staticpod.DeploymentState) {
	c.mu.Lock()
	c.node.deployments = slices.Clone(states)
	for name, rev := range c.node.granted {
		i := slices.IndexFunc(states, func(s staticpod.DeploymentState) bool { return s.Deployment.Name == name })
		if i < 0 || states[i].Applied == rev || states[i].Desired != rev {
			delete(c.node.granted, name) // applied, deleted or superseded
		}
	}
	for name, w := range c.node.waits {
		i := slices.IndexFunc(states, func(s staticpod.DeploymentState) bool { return s.Deployment.Name == name })
		switch {
		case i < 0 || states[i].Desired != w.revision:
			delete(c.node.waits, name) // deleted or superseded
		case w.retire == "" && states[i].Applied == w.revision, w.retire != "" && states[i].Retiring == "":
			delete(c.node.waits, name) // applied, or retired
		}
	}
	c.endRetirements(true)
	c.mu.Unlock()
	c.statusChanged()
}

// KubeletLost is the Pods watcher's Lost: kubelet stopped answering, so
// readiness is unknown until it lists its Pods again.
func (c *Coordinator) KubeletLost(err error) {
	c.mu.Lock()
	c.node.kubeletLost = err.Error()
	c.mu.Unlock()
	c.statusChanged()
}

// PodFindings takes what the node found about the Pods kubelet reports
// not ready (a failing readiness probe and its answer, a full disk), by
// UID: the reason a report gives for such a Pod.
func (c *Coordinator) PodFindings(findings map[types.UID]string) {
	c.mu.Lock()
	c.node.findings = maps.Clone(findings)
	c.mu.Unlock()
	c.statusChanged()
}

// statusChanged recomputes this node's report and sends it when it
// changed: straight into the leader's state when this node leads, through
// the next sync otherwise.
func (c *Coordinator) statusChanged() {
	c.mu.Lock()
	r := c.buildReport()
	changed := !proto.Equal(r, c.node.report)
	c.node.report = r
	c.mu.Unlock()
	if !changed {
		return
	}
	c.reportOwnStatus()
	c.poke()
}

// reportOwnStatus hands this node's report to its own leadership.
func (c *Coordinator) reportOwnStatus() {
	r := c.currentReport()
	c.mu.Lock()
	l := c.leader
	c.mu.Unlock()
	if l != nil {
		c.reportStatus(l, c.self(), r, c.clock.Now())
	}
}

// currentReport returns the report to send to a leader.
func (c *Coordinator) currentReport() *pb.StatusReport {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.node.report == nil {
		c.node.report = c.buildReport()
	}
	return c.node.report
}

// buildReport derives the node's report from the reconciler's states and
// kubelet's Pods. Called with c.mu held.
func (c *Coordinator) buildReport() *pb.StatusReport {
	r := &pb.StatusReport{Kubelet: c.opts.Kubelet}
	ends := c.node.holdEnds
	c.node.holdEnds = time.Time{}
	defer func() {
		if !c.node.holdEnds.Equal(ends) {
			select {
			case c.holdKick <- struct{}{}:
			default:
			}
		}
	}()
	for _, d := range c.node.deployments {
		rep := &pb.DeploymentReport{Name: d.Deployment.Name, Revision: d.Applied, Desired: d.Desired, Waiting: d.Waiting,
			Granted: c.node.granted[d.Deployment.Name], Retiring: d.Retiring}
		if !d.AppliedAt.IsZero() && d.Applied != "" {
			rep.AppliedAtUnixMs = d.AppliedAt.UnixMilli()
		}
		if d.Error != nil {
			rep.Error = &pb.ReportedError{Kind: d.Error.Kind, Message: d.Error.Message, Revision: d.Error.Revision}
		}
		c.readiness(rep, d)
		if d.Starting != "" && rep.Error == nil {
			// A node that has just started and still waits for what it
			// needs says so: the Pod is not ready, and nothing failed.
			rep.Readiness, rep.Reason = pb.Readiness_READINESS_NOT_READY, d.Starting
		}
		r.Deployments = append(r.Deployments, rep)
	}
	return r
}

// readiness fills in what kubelet says about the Pod of the applied
// revision. Called with c.mu held.
func (c *Coordinator) readiness(rep *pb.DeploymentReport, d staticpod.DeploymentState) {
	unknown := func(why string) {
		rep.Readiness, rep.Reason = pb.Readiness_READINESS_UNKNOWN, why
	}
	switch {
	case !c.opts.Kubelet:
		unknown("no kubelet Pods API on this node")
		return
	case c.node.kubeletLost != "":
		unknown("kubelet is down: its Pods API does not answer (" + c.node.kubeletLost + "): the node cannot tell whether the Pod runs; check kubelet on the node (systemctl status kubelet)")
		return
	case !c.node.podsSeen:
		unknown("kubelet's Pods API has not listed the Pods yet")
		return
	case d.Applied == "":
		rep.Readiness, rep.Reason = pb.Readiness_READINESS_NOT_READY, "the node has no static Pod of it"
		return
	}
	var found *corev1.Pod
	for _, p := range c.pods {
		if pods.Revision(p) != d.Applied || d.Namespace != "" && p.Namespace != d.Namespace {
			continue
		}
		if found == nil || pods.IsReady(p) {
			found = p
		}
	}
	if found == nil {
		rep.Readiness, rep.Reason = pb.Readiness_READINESS_NOT_READY, fmt.Sprintf("kubelet runs no Pod of revision %s yet", short(d.Applied))
		return
	}
	st := pods.StateOfWith(found, c.podStateOptions())
	rep.Restarts = uint32(st.Restarts)
	if st.Ready {
		rep.Readiness = pb.Readiness_READINESS_READY
		c.hold(rep, found, st.Restarts)
	} else {
		rep.Readiness, rep.Reason = pb.Readiness_READINESS_NOT_READY, "kubelet reports the Pod not ready"
		if f := c.node.findings[found.UID]; f != "" {
			rep.Reason += ": " + f
		}
		if st.Retrying != "" {
			rep.Reason = "kubelet pulls the image again: its pull failed while this node's registry was not serving (the agent was not running): " + st.Retrying
		}
	}
	if st.Problem != "" {
		rep.Reason = st.Problem
		if rep.Error == nil {
			rep.Error = &pb.ReportedError{Kind: "kubelet", Message: st.Problem, Revision: d.Applied}
		}
	}
}

// hold keeps a Pod that kubelet reports ready not ready while a container
// of it has no readiness probe and kubelet has not reported it ready for
// ProbelessHold: such a container is ready as soon as it starts, even one
// that exits a second later. Called with c.mu held.
func (c *Coordinator) hold(rep *pb.DeploymentReport, p *corev1.Pod, restarts int) {
	since, end := c.holdEnd(p, restarts)
	if end.IsZero() {
		return
	}
	rep.Readiness = pb.Readiness_READINESS_NOT_READY
	rep.Reason = fmt.Sprintf("kubelet reports the Pod ready since %s UTC; a Pod with a container without a readiness probe must stay ready %s before it counts (until %s UTC)",
		since.UTC().Format(time.TimeOnly), c.opts.ProbelessHold, end.UTC().Format(time.TimeOnly))
	if c.node.holdEnds.IsZero() || end.Before(c.node.holdEnds) {
		c.node.holdEnds = end
	}
}

// holdEnd is when the readiness hold of kubelet's ready Pod p (restarts
// restarts into its run) ends, and when it counts from; both zero when no
// hold applies (every container has a readiness probe, or holds are off)
// or it has ended. Called with c.mu held.
func (c *Coordinator) holdEnd(p *corev1.Pod, restarts int) (since, end time.Time) {
	hold := c.opts.ProbelessHold
	if hold < 0 || pods.HasReadinessProbes(p) {
		return time.Time{}, time.Time{}
	}
	now := c.clock.Now()
	// The hold counts from the latest moment the Pod may have become
	// ready: the end of the window kubelet's times leave, or when this
	// node first saw it ready, if that falls inside the window (or kubelet
	// gives no time). A sighting before the window was of an earlier run.
	from, since := pods.ReadySince(p)
	if seen, ok := c.node.readySeen[readyKey{p.UID, restarts}]; ok && (since.IsZero() || !seen.Before(from) && seen.Before(since)) {
		since = seen
	}
	if since.IsZero() {
		since = now
	}
	end = since.Add(hold)
	if !now.Before(end) {
		return time.Time{}, time.Time{}
	}
	return since, end
}

// endHolds reports again when the earliest readiness hold ends, so a Pod
// that stayed ready counts as ready without another word from kubelet.
// It runs until ctx ends.
func (c *Coordinator) endHolds(ctx context.Context) {
	for {
		c.mu.Lock()
		end := c.node.holdEnds
		c.mu.Unlock()
		var fire <-chan time.Time
		if !end.IsZero() {
			fire = c.clock.After(end.Sub(c.clock.Now()))
		}
		select {
		case <-ctx.Done():
			return
		case <-c.holdKick:
		case <-fire:
			c.statusChanged()
		}
	}
}

// sendStatus reports this node's deployments to the leader (every sync:
// the leader writes only what changed).
func (c *Coordinator) sendStatus(ctx context.Context, s *leaderLink) {
	if _, err := s.client.ReportStatus(ctx, c.currentReport()); err != nil {
		c.log.Warn("reporting the deployments' status failed", "leader", s.leader.LeaderID, "err", err)
	}
}

// localKnown reports whether this node knows its own endpoints: its
// kubelet listed its Pods (or it has none to ask), or they were set, or
// it drains. Until then a restarted agent neither reports nor publishes
// its endpoints, so the ones its Pods still serve stay in the snapshot.
// Called with c.mu held.
func (c *Coordinator) localKnown() bool {
	return !c.opts.Kubelet || c.node.podsSeen || c.node.endpointsSet || c.draining
}

// localEndpoints derives the node's ready endpoints, leaving out those of
// Services whose Pod is being replaced until a Pod of the new revision is
// ready (which ends the withdrawal), and those of an old Pod that retires
// beside a new one (maxSurge). Called with c.mu held.
func (c *Coordinator) localEndpoints() []Endpoint {
	if len(c.node.withdrawn) == 0 && len(c.node.retiring) == 0 {
		return LocalEndpoints(c.services, c.pods, c.opts.PodPrefix)
	}
	var out []Endpoint
	for _, s := range c.services {
		id := ServiceID{Namespace: s.ID.Namespace, Name: s.ID.Name}
		podList := c.withoutRetiring(id, c.pods)
		rev, withdrawn := c.node.withdrawn[id]
		if !withdrawn {
			out = append(out, LocalEndpoints([]staticpod.Service{s}, podList, c.opts.PodPrefix)...)
			continue
		}
		fresh := slices.DeleteFunc(slices.Clone(podList), func(p *corev1.Pod) bool { return pods.Revision(p) != rev })
		eps := LocalEndpoints([]staticpod.Service{s}, fresh, c.opts.PodPrefix)
		if len(eps) > 0 {
			delete(c.node.withdrawn, id)
		}
		out = append(out, eps...)
	}
	return out
}

// withoutService returns eps without the endpoints of svc.
func withoutService(eps []Endpoint, svc *ServiceID) []Endpoint {
	if svc == nil {
		return slices.Clone(eps)
	}
	return slices.DeleteFunc(slices.Clone(eps), func(e Endpoint) bool { return e.Service == *svc })
}

// reportedEndpoints is eps in the API's form.
func reportedEndpoints(eps []Endpoint) []*pb.ReportedEndpoint {
	out := make([]*pb.ReportedEndpoint, 0, len(eps))
	for _, e := range eps {
		out = append(out, &pb.ReportedEndpoint{Namespace: e.Service.Namespace, Service: e.Service.Name, Address: e.Addr.String()})
	}
	return out
}

// StatusReport returns this node's current report of its deployments, as the
// leader receives it.
func (c *Coordinator) StatusReport() *pb.StatusReport {
	return proto.Clone(c.currentReport()).(*pb.StatusReport)
}

// podStateOptions are what pods.StateOfWith may know of this node.
func (c *Coordinator) podStateOptions() pods.StateOptions {
	var o pods.StateOptions
	if c.opts.NodeRegistry != nil {
		o.NodeRegistry = c.opts.NodeRegistry()
	}
	return o
}
