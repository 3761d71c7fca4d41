// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"time"

	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/agent/workload"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/state"
)

// UpdateKind says what an Update asks the Gate.
type UpdateKind int

const (
	// Replace replaces the running Pod of revision From with revision To
	// in place: its file is removed, and the new one written once the old
	// Pod stopped (maxUnavailable).
	Replace UpdateKind = iota
	// Surge starts revision To as the deployment's second Pod, beside the
	// running one of revision From, which keeps serving (maxSurge).
	Surge
	// Retire stops the Pod of revision From while the deployment's other
	// Pod, of revision Keep, stays: the end of a maxSurge update, or of
	// one a later commit superseded.
	Retire
)

func (k UpdateKind) String() string {
	switch k {
	case Surge:
		return "surge"
	case Retire:
		return "retire"
	}
	return "replace"
}

// Update is one change of a deployment's running Pods the Gate decides on.
type Update struct {
	Kind           UpdateKind
	Deployment     state.Key
	Pod, Namespace string
	// From is the revision of the running Pod the update concerns, To the
	// committed revision.
	From, To string
	// Static is the static Pod name of From's Pod (Pod, or
	// nodepod.SecondName(Pod)); FromIncarnation its podmin.dev/incarnation
	// ("" in a file written before incarnations).
	Static, FromIncarnation string
	// Keep and KeepIncarnation name the Pod that stays (Retire).
	Keep, KeepIncarnation string
	// Service is the deployment's Service, nil without one: its endpoints
	// on this node of the Pod that goes are withdrawn before it stops.
	Service *state.ServiceID
}

// Gate decides when a running Pod may be replaced by a new revision, when
// a new revision may start beside it (maxSurge) and when the older of two
// Pods of a deployment may stop: the index says what each Pod is, the
// Gate only when it changes. New Pods, deleted Pods and file changes
// within one revision (a renewed workload identity) never ask. Admit
// returns false with the reason to keep the running Pods as they are for
// now; the reconciler asks again on its next pass.
// A Gate may keep saying no after it has decided to let the Pod go (its
// endpoints are being withdrawn, or it drains): Admit never blocks on
// such a wait, and a Gate that waits for a moment of its own makes the
// loop pass again then (the coordinator's does, through the loop's
// hint).
type Gate interface {
	Admit(ctx context.Context, u Update) (bool, string)
}

// HeldPod is a Pod whose new revision the Gate held back in a pass.
type HeldPod struct {
	Deployment state.Key
	Pod        string
	// Revision is the revision waiting; Reason the Gate's.
	Revision, Reason string
}

// pendingValues are values fetched for a revision whose Pod waits for the
// Gate, so they are read once per revision.
type pendingValues struct {
	revision string
	values   mounts.Values
}

// DeploymentState is what the node knows of one deployment of its
// NodeGroup after the last pass that read the index.
type DeploymentState struct {
	Deployment state.Key
	// Pod and Namespace name the static Pod (Namespace is empty when the
	// payload could not be read).
	Pod, Namespace string
	// Service is the deployment's Service, nil without one.
	Service *state.ServiceID
	// Applied is the revision of the static Pod file ("" without a file),
	// AppliedAt when that file was written.
	Applied   string
	AppliedAt time.Time
	// Desired is the revision the deployment index names.
	Desired string
	// Waiting, when set, says why Desired is not applied yet (the Gate).
	Waiting string
	// Starting, when set, says what a node that has just started still
	// waits for before it can publish the Pod (the cluster's workload CA
	// not readable yet): not a failure during StartupGrace.
	Starting string
	// Retiring is the revision of the deployment's second Pod, which
	// still runs beside the one of Applied (a maxSurge update), and
	// RetireWaiting why it has not stopped yet (the Gate); both empty
	// while the node runs one Pod of the deployment.
	Retiring, RetireWaiting string
	// Error is the deployment's failure in the last pass, nil when none.
	Error *DeploymentError
}

// StartupGrace is how long after the agent started a Pod whose workload
// identity waits for the cluster's workload CA (identity/ca.json not
// readable yet: the leader creates it, a new node reads it) is reported
// as starting rather than failed.
const StartupGrace = time.Minute

// DeploymentError is why the last pass could not publish a deployment.
type DeploymentError struct {
	// Kind is state.ErrorPayload, ErrorSecret, ErrorIdentity or ErrorFile.
	Kind, Message string
	// Revision is the revision the pass tried to publish.
	Revision string
}

// maxErrorMessage bounds an error message a node reports.
const maxErrorMessage = 1024

// Deployments returns the NodeGroup's deployments as the last pass that
// read the index left them, sorted by name.
func (r *Reconciler) Deployments() []DeploymentState {
	r.smu.Lock()
	defer r.smu.Unlock()
	return slices.Clone(r.states)
}

// incarnation is the podmin.dev/incarnation a Pod at revision gets: that
// of the deployment's file that runs the same revision (so an agent
// restart rewrites nothing), else a new one, so that kubelet never takes
// a Pod that returns to an earlier revision for the Pod that ran it then.
func (r *Reconciler) incarnation(pod, revision string) string {
	for _, f := range r.filesOf(pod, nil) {
		if f.revision == revision && f.incarnation != "" {
			return f.incarnation
		}
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// record keeps the state of every deployment of items after a pass and
// tells Hooks.Deployments.
func (r *Reconciler) record(items []state.Item, c *candidate) {
	failed := map[state.Key]PodFailure{}
	for _, f := range c.failures {
		failed[f.Deployment] = f
	}
	staged := map[state.Key]*stagedPod{}
	for i := range c.pods {
		staged[c.pods[i].pod.Key] = &c.pods[i]
	}
	taken := takenNames(c)
	out := make([]DeploymentState, 0, len(items))
	for _, it := range items {
		ds := DeploymentState{Deployment: it.Key, Pod: it.Key.Name, Desired: nodepod.Revision(it.Entry)}
		if id, ok := it.Entry.ServiceID(); ok {
			ds.Service = &id
		}
		ds.Applied, ds.AppliedAt, ds.Retiring = deploymentFiles(r.filesOf(it.Key.Name, taken), ds.Desired)
		if sp := staged[it.Key]; sp != nil {
			ds.Namespace, ds.Waiting = sp.pod.Namespace, sp.held
			if ds.Retiring != "" {
				ds.RetireWaiting = sp.retireWhy
			}
		}
		if f, ok := failed[it.Key]; ok {
			msg := f.Err.Error()
			if len(msg) > maxErrorMessage {
				msg = msg[:maxErrorMessage] + "…"
			}
			if f.Kind == state.ErrorIdentity && errors.Is(f.Err, workload.ErrNoCA) && r.now().Sub(r.started) < StartupGrace {
				ds.Starting = "starting: the workload CA is not readable yet, so its identity cannot be issued: " + msg
			} else {
				ds.Error = &DeploymentError{Kind: f.Kind, Message: msg, Revision: f.Revision}
			}
		}
		out = append(out, ds)
	}
	slices.SortFunc(out, func(a, b DeploymentState) int { return strings.Compare(a.Deployment.Name, b.Deployment.Name) })
	for pod := range r.pending {
		if _, ok := staged[state.Key{NodeGroup: r.opts.NodeGroup, Name: pod}]; !ok {
			delete(r.pending, pod)
		}
	}
	r.smu.Lock()
	r.states = out
	r.smu.Unlock()
	if r.opts.Hooks.Deployments != nil {
		r.opts.Hooks.Deployments(slices.Clone(out))
	}
}
