// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/agent/pods"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/nodepod"
)

// maxSurge rollouts. A node asks the leader for a surge slot before it
// starts a deployment's new revision beside the running Pod; the leader
// grants one while fewer than maxSurge of the NodeGroup's nodes run two
// Pods of the deployment (or hold a surge slot whose second Pod has not
// replaced the first yet), and at once to a node whose running Pod is
// known broken, as Kubernetes' DaemonSet controller does. Nothing is
// withdrawn then. The node lets its old Pod go (Retire) only once the
// new one is ready (kubelet's word, and the probeless hold), or at once
// when the old one serves nothing; a serving old Pod's endpoints are
// withdrawn first, by incarnation, so the new Pod's stay: the node asks
// for a retire slot with its endpoints without the old Pod's, the leader
// writes the snapshot without them, every live node confirms it, the
// drain passes, and only then is the old file removed. The slot frees
// when the node reports the new revision ready and one Pod again.

// decideSurge answers a surge slot for sk: granted while fewer than
// allowed of the NodeGroup's live nodes other than sk's are surging.
// Called with l.mu held.
func (l *leaderState) decideSurge(sk slotKey, maxSurge intstr.IntOrString, allowed, expected int, nodes []string, now time.Time,
	record func() (bool, string, error)) (bool, string, error) {
	var why []string
	for _, id := range nodes {
		if id == sk.node {
			continue
		}
		if busy, reason := l.surging(slotKey{node: id, deployment: sk.deployment}, now); busy {
			why = append(why, id+" "+reason)
		}
	}
	if len(why) < allowed {
		return record()
	}
	return false, fmt.Sprintf("maxSurge %s allows %d of %d node(s) to run a second Pod of %s at once: %s",
		maxSurge.String(), allowed, expected, sk.deployment, strings.Join(why, "; ")), nil
}

// surging reports whether a node runs, or may run, a second Pod of a
// deployment, and why: it holds a slot whose new Pod has not replaced the
// old one yet, reports two Pods (or an earlier leader's slot), or has not
// reported to this leader at all. Called with l.mu held.
func (l *leaderState) surging(sk slotKey, now time.Time) (bool, string) {
	st, why := l.settled(sk, now)
	if st == nil {
		return true, why
	}
	d := st.deployments[sk.deployment]
	switch {
	case d == nil:
		return false, ""
	case d.GetRetiring() != "":
		return true, fmt.Sprintf("runs %s beside %s", short(d.GetRevision()), short(d.GetRetiring()))
	case d.GetGranted() != "":
		return true, fmt.Sprintf("is updating to %s (slot of an earlier leader)", short(d.GetGranted()))
	}
	return false, ""
}

// retired is the old Pod of a deployment whose endpoints this node leaves
// out while it retires: by incarnation, or, for a Pod whose file predates
// incarnations, by revision.
type retired struct {
	deployment, incarnation, revision string
}

// matches reports whether kubelet's Pod p is the retiring one.
func (r retired) matches(p *corev1.Pod) bool {
	if r.incarnation != "" {
		return p.Annotations[nodepod.IncarnationAnnotation] == r.incarnation
	}
	return pods.Revision(p) == r.revision
}

// podRun finds kubelet's Pod of a static Pod file: its incarnation (or,
// without one, its revision) in namespace, a ready one first.
func podRun(podList []*corev1.Pod, namespace, incarnation, revision string) *corev1.Pod {
	var found *corev1.Pod
	for _, p := range podList {
		if namespace != "" && cmp.Or(p.Namespace, "default") != namespace {
			continue
		}
		if incarnation != "" && p.Annotations[nodepod.IncarnationAnnotation] != incarnation ||
			incarnation == "" && pods.Revision(p) != revision {
			continue
		}
		if found == nil || pods.IsReady(p) {
			found = p
		}
	}
	return found
}

// admitSurge is the Gate's answer to starting a new revision beside the
// running Pod: the leader's surge slot. Nothing is withdrawn; without an
// answering leader the node waits its leaderless delay, as for any update.
func (c *Coordinator) admitSurge(ctx context.Context, u staticpod.Update) (bool, string) {
	c.node.sendMu.Lock()
	defer c.node.sendMu.Unlock()
	c.mu.Lock()
	known := c.localKnown()
	// Every endpoint the node has: a leader of an earlier version takes
	// the request for a replacement, which keeps what the node sends.
	keep := slices.Clone(c.local)
	c.mu.Unlock()
	if !known {
		c.askAgain(c.clock.Now().Add(c.timing.Retry))
		return false, "kubelet's Pods API has not listed this node's Pods yet: the node asks for a surge slot once it can tell whether its running Pod serves"
	}
	a := c.askSlot(ctx, u, keep, true, pb.SlotKind_SLOT_SURGE)
	switch {
	case a.noLeader != "":
		ok, why := c.leaderless(u, nil, a.noLeader)
		if ok {
			c.watchNew(u)
		}
		return ok, why
	case !a.granted:
		c.answered(u)
		return false, a.reason
	}
	c.watchNew(u)
	return true, ""
}

// watchNew makes the node pass again as soon as kubelet reports a Pod of
// the surge's new revision ready, when the old one may go.
func (c *Coordinator) watchNew(u staticpod.Update) {
	w := u
	w.Kind, w.Keep, w.KeepIncarnation = staticpod.Retire, u.To, ""
	c.mu.Lock()
	c.node.retireWaits[u.Deployment.Name] = w
	c.mu.Unlock()
}

// admitRetire is the Gate's answer to stopping the older of a
// deployment's two Pods. A Pod that serves nothing (kubelet does not
// report it ready) goes at once; a ready one only once the Pod that stays
// is ready, and, when it backs the deployment's Service, after its
// endpoints were withdrawn (every live node confirmed the snapshot
// without them) and drained, as for a replacement.
func (c *Coordinator) admitRetire(ctx context.Context, u staticpod.Update) (bool, string) {
	c.node.sendMu.Lock()
	defer c.node.sendMu.Unlock()
	name := u.Deployment.Name
	key := retireKey(u)
	c.mu.Lock()
	w := c.node.waits[name]
	if w != nil && (w.revision != u.To || w.retire != key) {
		delete(c.node.waits, name) // superseded by a later commit or another retirement
		w = nil
	}
	known := c.localKnown()
	c.mu.Unlock()
	if w != nil && !w.confirmed.IsZero() {
		return c.waitFor(u, w, slotAnswer{})
	}
	if w == nil {
		if !known {
			c.askAgain(c.clock.Now().Add(c.timing.Retry))
			return false, "kubelet's Pods API has not listed this node's Pods yet: the node lets the old Pod go once it can tell which one serves"
		}
		c.mu.Lock()
		if lost := c.node.kubeletLost; lost != "" {
			c.mu.Unlock()
			return false, "kubelet's Pods API does not answer (" + lost + "): the node cannot tell which Pod serves; both keep running"
		}
		old := podRun(c.pods, u.Namespace, u.FromIncarnation, u.From)
		serving := old != nil && pods.IsReady(old)
		var why string
		var askAt time.Time
		if serving {
			why, askAt = c.notReadyYet(u)
		}
		drains := serving && c.backs(u, old)
		c.mu.Unlock()
		if !askAt.IsZero() {
			c.askAgain(askAt)
		}
		switch {
		case why != "":
			return false, why
		case !serving:
			c.log.Info("the old Pod serves nothing: it goes at once", "deployment", u.Deployment.String(), "revision", short(u.From))
			return true, ""
		case !drains:
			// Ready, but no endpoint of a Service: nothing to withdraw.
			return true, ""
		}
	}
	if u.Service == nil {
		return true, "" // no Service, nothing to withdraw
	}
	c.mu.Lock()
	svc := ServiceID{Namespace: u.Service.Namespace, Name: u.Service.Name}
	c.node.retiring[svc] = retired{deployment: name, incarnation: u.FromIncarnation, revision: u.From}
	remaining := c.localEndpoints()
	if !c.draining {
		c.local = remaining
	}
	c.mu.Unlock()
	a := c.askSlot(ctx, u, remaining, w == nil || !w.asked, pb.SlotKind_SLOT_RETIRE)
	if w == nil {
		if !a.granted && a.noLeader == "" {
			// The leader answers and refuses (it has not read the commit
			// yet, say): asked again at the next pass. The old Pod's
			// endpoints stay out meanwhile; the new one serves.
			c.askAgain(c.clock.Now().Add(c.timing.Retry))
			return false, a.reason
		}
		// Granted, or no leader answers: the wait for the confirmations
		// starts now and is bounded by the lease window, after which no
		// node keeps a backend of a leader it no longer hears.
		w = &slotWait{revision: u.To, retire: key, drains: true, granted: c.clock.Now()}
		c.mu.Lock()
		c.node.waits[name] = w
		c.mu.Unlock()
	}
	w.asked = true
	if !a.granted && a.noLeader == "" {
		a.noLeader = a.reason
	}
	return c.waitFor(u, w, a)
}

// backs reports whether kubelet's Pod p gives the deployment's Service of
// u an endpoint on this node. Called with c.mu held.
func (c *Coordinator) backs(u staticpod.Update, p *corev1.Pod) bool {
	if u.Service == nil {
		return false
	}
	for _, s := range c.services {
		if s.ID == *u.Service && len(LocalEndpoints([]staticpod.Service{s}, []*corev1.Pod{p}, c.opts.PodPrefix)) > 0 {
			return true
		}
	}
	return false
}

// retireKey names the Pod a retirement stops.
func retireKey(u staticpod.Update) string {
	return u.Static + "@" + u.From + "@" + u.FromIncarnation
}

// notReadyYet says why the Pod that stays is not ready to serve alone,
// "" when it is: kubelet reports it ready and, for a Pod with a container
// without a readiness probe, has for ProbelessHold. The node is asked
// again when kubelet reports it ready (wakeRetirements), or at askAt when
// only the hold is left. Called with c.mu held.
func (c *Coordinator) notReadyYet(u staticpod.Update) (why string, askAt time.Time) {
	keep := podRun(c.pods, u.Namespace, u.KeepIncarnation, u.Keep)
	c.node.retireWaits[u.Deployment.Name] = u
	switch {
	case keep == nil:
		return fmt.Sprintf("the old Pod (revision %s) keeps serving until the new one (revision %s) is ready: kubelet runs no Pod of it yet", short(u.From), short(u.Keep)), time.Time{}
	case !pods.IsReady(keep):
		why := fmt.Sprintf("the old Pod (revision %s) keeps serving until the new one (revision %s) is ready: kubelet reports it not ready", short(u.From), short(u.Keep))
		if f := c.node.findings[keep.UID]; f != "" {
			why += ": " + f
		}
		if p := pods.StateOfWith(keep, c.podStateOptions()).Problem; p != "" {
			why += ": " + p
		}
		return why, time.Time{}
	}
	delete(c.node.retireWaits, u.Deployment.Name)
	if _, end := c.holdEnd(keep, pods.StateOf(keep).Restarts); !end.IsZero() {
		return fmt.Sprintf("the old Pod (revision %s) keeps serving until the new one (revision %s) has been ready %s (until %s UTC): a container of it has no readiness probe",
			short(u.From), short(u.Keep), c.opts.ProbelessHold, end.UTC().Format(time.TimeOnly)), end
	}
	return "", time.Time{}
}

// wakeRetirements asks the reconcile loop for a pass when the Pod a
// retirement waits for became ready. Called with c.mu held; it reports
// whether to.
func (c *Coordinator) wakeRetirements() bool {
	wake := false
	for name, u := range c.node.retireWaits {
		keep := podRun(c.pods, u.Namespace, u.KeepIncarnation, u.Keep)
		if keep != nil && pods.IsReady(keep) {
			delete(c.node.retireWaits, name)
			wake = true
		}
	}
	return wake
}

// endRetirements forgets the retirements that are over: the deployment no
// longer reports the old Pod and kubelet no longer runs it; with states
// (the reconciler's fresh word, not kubelet's) also the waits for a new
// Pod that no longer matter. Called with c.mu held.
func (c *Coordinator) endRetirements(states bool) {
	for svc, r := range c.node.retiring {
		i := slices.IndexFunc(c.node.deployments, func(s staticpod.DeploymentState) bool { return s.Deployment.Name == r.deployment })
		if i >= 0 && c.node.deployments[i].Retiring != "" {
			continue
		}
		if slices.ContainsFunc(c.pods, r.matches) {
			continue
		}
		delete(c.node.retiring, svc)
	}
	if !states {
		// The states may predate the pass that registered a wait.
		return
	}
	for name, u := range c.node.retireWaits {
		i := slices.IndexFunc(c.node.deployments, func(s staticpod.DeploymentState) bool { return s.Deployment.Name == name })
		if i < 0 || c.node.deployments[i].Desired != u.To || c.node.deployments[i].Applied == u.To && c.node.deployments[i].Retiring == "" {
			delete(c.node.retireWaits, name) // deleted, superseded, or done
		}
	}
}

// withoutRetiring returns podList without the Pods whose endpoints a
// retirement of svc leaves out. Called with c.mu held.
func (c *Coordinator) withoutRetiring(svc ServiceID, podList []*corev1.Pod) []*corev1.Pod {
	r, ok := c.node.retiring[svc]
	if !ok {
		return podList
	}
	return slices.DeleteFunc(slices.Clone(podList), r.matches)
}
