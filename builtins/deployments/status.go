// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deployments

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// ErrNoDeployment reports that the deployment status or a wait names is
// not in the deployment index.
var ErrNoDeployment = errors.New("no such deployment")

// Deployment states of a DeploymentStatus.
const (
	// StateReady: every expected node runs the committed revision and
	// kubelet reports it ready.
	StateReady = "ready"
	// StateProgressing: nodes are still applying the revision or waiting
	// for its Pods to become ready, or nodes are missing.
	StateProgressing = "progressing"
	// StateFailed: a node reports an error for the committed revision.
	StateFailed = "failed"
	// StateUnknown: no current status can be proven (no live leader, no
	// published status, or a new leader still collecting reports).
	StateUnknown = "unknown"
)

// StatusOptions select what status reports: one NodeGroup (empty: every
// NodeGroup of the index) and one deployment (empty: all of them).
type StatusOptions struct {
	NodeGroup string
	Name      string
}

// StatusResult is the observed state of the selected deployments.
type StatusResult struct {
	Bucket    string    `json:"bucket"`
	CheckedAt time.Time `json:"checkedAt"`
	// Leader is the coordination lease as read.
	Leader LeaderStatus `json:"leader"`
	// NodeGroups are sorted by name.
	NodeGroups []NodeGroupStatus `json:"nodegroups"`
	// IndexMissing is set when deployments/index.json is missing from a
	// bucket that holds desired state: what is committed is unknown, so
	// NodeGroups is empty (see state.ErrIndexMissing).
	IndexMissing bool `json:"indexMissing"`
}

// LeaderStatus is the coordination lease: who leads, under which term,
// and whether it was renewed recently enough to take as held.
type LeaderStatus struct {
	ID          string     `json:"id"`
	Term        uint64     `json:"term"`
	Live        bool       `json:"live"`
	LastRenewed *time.Time `json:"lastRenewed"`
}

// NodeGroupStatus is one NodeGroup: its nodes and its deployments.
type NodeGroupStatus struct {
	NodeGroup string `json:"nodegroup"`
	// Expected is the configured size, nil when unknown.
	Expected *int `json:"expected"`
	Live     int  `json:"live"`
	Missing  int  `json:"missing"`
	// UpdatedAt is when the leader wrote the status object read.
	UpdatedAt *time.Time `json:"updatedAt"`
	// Problem says why the NodeGroup's status is unknown; "" when current.
	Problem     string             `json:"problem"`
	Nodes       []NodeSummary      `json:"nodes"`
	Deployments []DeploymentStatus `json:"deployments"`
	// Refused are the agents whose claim the leader refused (a node ID
	// another live agent holds, say): they take no part in coordination,
	// so their Pods' endpoints are not served.
	Refused []state.RefusedNode `json:"refused"`
}

// NodeSummary is one node of a NodeGroup.
type NodeSummary struct {
	Node    string `json:"node"`
	State   string `json:"state"`
	Kubelet bool   `json:"kubelet"`
}

// DeploymentStatus is one deployment's observed state.
type DeploymentStatus struct {
	Name      string `json:"name"`
	NodeGroup string `json:"nodegroup"`
	// Revision is the committed revision (podmin.dev/revision).
	Revision string `json:"revision"`
	// State is StateReady, StateProgressing, StateFailed or StateUnknown;
	// Summary says the same in words.
	State   string `json:"state"`
	Summary string `json:"summary"`
	// Applied and Ready count the nodes running Revision (ready); Total is
	// the expected number of nodes (the configured size, or the live
	// nodes when it is unknown).
	Applied int `json:"applied"`
	Ready   int `json:"ready"`
	Total   int `json:"total"`
	// OldestReport is the oldest of the nodes' current reports about the
	// deployment (a node reports again only when something changes) and
	// AgeSeconds its age.
	OldestReport *time.Time `json:"oldestReport"`
	AgeSeconds   float64    `json:"ageSeconds"`
	// Rollout is the leader's pacing of the revision, nil when no node
	// waits for or holds a rollout slot.
	Rollout *state.RolloutStatus `json:"rollout"`
	// Errors are the nodes' errors for Revision.
	Errors []NodeError `json:"errors"`
	// Nodes are the live nodes' reports, sorted by node.
	Nodes []NodeDeployment `json:"nodes"`
}

// NodeError is a node's error for a revision.
type NodeError struct {
	Node     string `json:"node"`
	Kind     string `json:"kind"`
	Message  string `json:"message"`
	Revision string `json:"revision"`
}

// NodeDeployment is what one node reports about the deployment.
type NodeDeployment struct {
	Node      string `json:"node"`
	Revision  string `json:"revision"`
	Readiness string `json:"readiness"`
	Reason    string `json:"reason"`
	Restarts  int    `json:"restarts"`
	Waiting   string `json:"waiting"`
	// Retiring is the revision of the deployment's older Pod, which still
	// runs beside the one of Revision during a maxSurge update.
	Retiring   string     `json:"retiring,omitempty"`
	AppliedAt  *time.Time `json:"appliedAt"`
	ReportedAt *time.Time `json:"reportedAt"`
}

// Status reports what the nodes observe of the selected deployments: per
// deployment the committed revision, how many of the NodeGroup's expected
// nodes run it and report it ready, the age of the oldest report, the
// errors, and each node's report. It reads the index, the lease and one
// status object per NodeGroup, whatever the number of nodes. Status that
// cannot be proven current is reported as unknown, with the reason. A
// missing index in a bucket that holds desired state returns a result
// with IndexMissing set and an error wrapping state.ErrIndexMissing.
func Status(ctx context.Context, e *openv.Env, opts StatusOptions) (StatusResult, error) {
	if opts.NodeGroup != "" {
		if err := ids.ValidateNodeGroup(opts.NodeGroup); err != nil {
			return StatusResult{}, openv.InvalidArgument(fmt.Errorf("--nodegroup: %w", err))
		}
	}
	if opts.Name != "" && opts.NodeGroup == "" {
		return StatusResult{}, openv.InvalidArgument(errors.New("a deployment name needs its NodeGroup: pass --nodegroup"))
	}
	if opts.Name != "" {
		if _, err := state.NewKey(opts.NodeGroup, opts.Name); err != nil {
			return StatusResult{}, openv.InvalidArgument(err)
		}
	}
	c, store, err := e.OpenCluster(ctx)
	if err != nil {
		return StatusResult{}, err
	}
	ix, _, err := state.ReadDesiredIndex(ctx, store)
	if errors.Is(err, state.ErrIndexMissing) {
		return StatusResult{Bucket: c.Bucket, CheckedAt: e.CurrentTime().UTC(), NodeGroups: []NodeGroupStatus{}, IndexMissing: true}, err
	}
	if err != nil {
		return StatusResult{}, e.Explain(c, err)
	}
	items := ix.Items()
	if opts.NodeGroup != "" {
		items = ix.NodeGroup(opts.NodeGroup)
	}
	if opts.Name != "" {
		k, err := state.NewKey(opts.NodeGroup, opts.Name)
		if err != nil {
			return StatusResult{}, err
		}
		entry, ok := ix.Lookup(k)
		if !ok {
			return StatusResult{}, fmt.Errorf("%w: deployment %s is not in the deployment index: run \"podmin list\" to see deployments", ErrNoDeployment, k)
		}
		items = []state.Item{{Key: k, Entry: entry}}
	}
	r := statusReader{store: store}
	res, err := r.status(ctx, e.CurrentTime(), items, opts.NodeGroup)
	if err != nil {
		return StatusResult{}, e.Explain(c, err)
	}
	res.Bucket = c.Bucket
	return res, nil
}

// statusReader reads the lease and status objects, remembering their
// ETags so that a wait's repeated reads are conditional.
type statusReader struct {
	store   objstore.Store
	objects map[string]cachedStatus
}

type cachedStatus struct {
	etag   string
	status *state.NodeGroupStatus
}

// status reads the lease and the status object of every NodeGroup of
// items (and of nodegroup, when set) and summarizes each item.
func (r *statusReader) status(ctx context.Context, now time.Time, items []state.Item, nodegroup string) (StatusResult, error) {
	res := StatusResult{CheckedAt: now.UTC(), NodeGroups: []NodeGroupStatus{}}
	lease, leaseOK, err := state.ReadLease(ctx, r.store)
	if err != nil {
		return res, err
	}
	if leaseOK {
		res.Leader = LeaderStatus{ID: lease.LeaderID, Term: lease.Term, Live: lease.Live(now)}
		if !lease.LastUpdated.IsZero() {
			t := lease.LastUpdated.UTC()
			res.Leader.LastRenewed = &t
		}
	}
	byGroup := map[string][]state.Item{}
	if nodegroup != "" {
		byGroup[nodegroup] = nil
	}
	for _, it := range items {
		byGroup[it.Key.NodeGroup] = append(byGroup[it.Key.NodeGroup], it)
	}
	for _, ng := range sortedKeys(byGroup) {
		s, err := r.read(ctx, ng)
		if err != nil {
			return res, err
		}
		res.NodeGroups = append(res.NodeGroups, summarizeGroup(ng, s, lease, leaseOK, now, byGroup[ng]))
	}
	return res, nil
}

// read returns a NodeGroup's status object (nil when there is none),
// conditionally on the ETag read last.
func (r *statusReader) read(ctx context.Context, ng string) (*state.NodeGroupStatus, error) {
	key, err := state.NodeGroupStatusPath(ng)
	if err != nil {
		return nil, err
	}
	if r.objects == nil {
		r.objects = map[string]cachedStatus{}
	}
	prev, cached := r.objects[ng]
	opts := objstore.GetOptions{}
	if cached && prev.etag != "" {
		opts.IfNoneMatch = prev.etag
	}
	obj, err := r.store.Get(ctx, key, opts)
	switch {
	case errors.Is(err, objstore.ErrNotModified):
		return prev.status, nil
	case errors.Is(err, objstore.ErrNotFound):
		r.objects[ng] = cachedStatus{}
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	s, err := state.DecodeNodeGroupStatus(obj.Data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: the leader rewrites it when the NodeGroup's status next changes", key, err)
	}
	r.objects[ng] = cachedStatus{etag: obj.ETag, status: s}
	return s, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// groupProblem says why a NodeGroup's status object cannot be taken as
// current, "" when it can.
func groupProblem(ng string, s *state.NodeGroupStatus, lease state.Lease, leaseOK bool, now time.Time) string {
	switch {
	case !leaseOK:
		return "no agent takes part in coordination yet (" + state.DNSLeaderPath + " is absent): nodes report their Pods only with coordination, which needs the cluster CA that podmin setup stores"
	case !lease.Live(now):
		last := "never"
		if !lease.LastUpdated.IsZero() {
			last = lease.LastUpdated.UTC().Format(time.RFC3339) + " (" + now.Sub(lease.LastUpdated).Round(time.Second).String() + " ago)"
		}
		return "no leader is live (the lease " + state.DNSLeaderPath + " was last renewed " + last + "): what the nodes run now is unknown"
	case s == nil:
		return fmt.Sprintf("the leader %s has not published NodeGroup %s's status yet (no %s%s.json)", lease.LeaderID, ng, state.NodeGroupStatusPrefix, ng)
	case s.Term != lease.Term:
		return fmt.Sprintf("the leader %s of term %d has not published NodeGroup %s's status yet (the object is of term %d)", lease.LeaderID, lease.Term, ng, s.Term)
	case !s.Settled:
		return fmt.Sprintf("the leader %s of term %d still collects the reports of NodeGroup %s's nodes", lease.LeaderID, lease.Term, ng)
	}
	return ""
}

// summarizeGroup summarizes one NodeGroup's deployments from its status
// object.
func summarizeGroup(ng string, s *state.NodeGroupStatus, lease state.Lease, leaseOK bool, now time.Time, items []state.Item) NodeGroupStatus {
	out := NodeGroupStatus{NodeGroup: ng, Nodes: []NodeSummary{}, Deployments: []DeploymentStatus{}, Refused: []state.RefusedNode{},
		Problem: groupProblem(ng, s, lease, leaseOK, now)}
	if s != nil {
		out.Expected, out.Live, out.Missing = s.Expected, s.Live, s.Missing
		out.Refused = append(out.Refused, s.Refused...)
		t := s.UpdatedAt.UTC()
		out.UpdatedAt = &t
		for _, n := range s.Nodes {
			out.Nodes = append(out.Nodes, NodeSummary{Node: n.Node, State: n.State, Kubelet: n.Kubelet})
		}
	}
	for _, it := range items {
		out.Deployments = append(out.Deployments, summarize(it, s, out.Problem, now))
	}
	return out
}

// summarize is one deployment's status at its committed revision.
func summarize(it state.Item, s *state.NodeGroupStatus, problem string, now time.Time) DeploymentStatus {
	d := DeploymentStatus{Name: it.Key.Name, NodeGroup: it.Key.NodeGroup, Revision: nodepod.Revision(it.Entry),
		Errors: []NodeError{}, Nodes: []NodeDeployment{}}
	if s == nil {
		d.State, d.Summary = StateUnknown, problem
		return d
	}
	d.Total = s.Live
	if s.Expected != nil {
		d.Total = *s.Expected
	}
	var oldest time.Time
	var waiting, notReady, noKubelet, unknown, beside []string
	for _, n := range s.Nodes {
		if n.State != state.NodeLive {
			continue
		}
		nd := NodeDeployment{Node: n.Node, Readiness: state.Unknown, Reason: "the node reports nothing about this deployment"}
		failed := false
		for _, r := range n.Deployments {
			if r.Name != it.Key.Name {
				continue
			}
			nd = NodeDeployment{Node: n.Node, Revision: r.Revision, Readiness: r.Readiness, Reason: r.Reason, Restarts: r.Restarts,
				Waiting: r.Waiting, Retiring: r.Retiring, AppliedAt: r.AppliedAt}
			at := r.ReportedAt
			nd.ReportedAt = &at
			if oldest.IsZero() || at.Before(oldest) {
				oldest = at
			}
			if errorFor(r, d.Revision) {
				d.Errors = append(d.Errors, NodeError{Node: n.Node, Kind: r.Error.Kind, Message: r.Error.Message, Revision: r.Error.Revision})
				failed = true
			}
		}
		if nd.Revision == d.Revision {
			d.Applied++
			switch {
			case nd.Readiness == state.Ready:
				d.Ready++
			case !n.Kubelet:
				noKubelet = append(noKubelet, n.Node)
			case failed:
				// Its error below says why: kubelet's problem is both
				// the node's reason and its error.
			case nd.Readiness == state.Unknown:
				// Its kubelet does not answer (or has not listed its Pods
				// yet): nobody can say whether the Pod runs.
				unknown = append(unknown, n.Node+" ("+cmp.Or(nd.Reason, "readiness unknown")+")")
			default:
				notReady = append(notReady, n.Node+" ("+cmp.Or(nd.Reason, "not ready")+")")
			}
		} else if nd.Waiting != "" {
			waiting = append(waiting, n.Node)
		}
		if nd.Retiring != "" {
			beside = append(beside, n.Node+" (revision "+short(nd.Retiring)+")")
		}
		d.Nodes = append(d.Nodes, nd)
	}
	if !oldest.IsZero() {
		t := oldest.UTC()
		d.OldestReport, d.AgeSeconds = &t, now.Sub(oldest).Seconds()
	}
	for _, r := range s.Rollouts {
		if r.Name == it.Key.Name && r.Revision == d.Revision {
			ro := r
			d.Rollout = &ro
		}
	}
	parts := []string{fmt.Sprintf("%d/%d applied, %d/%d ready", d.Applied, d.Total, d.Ready, d.Total)}
	if len(waiting) > 0 {
		parts = append(parts, "waiting for a rollout slot: "+strings.Join(waiting, ", "))
	}
	if len(notReady) > 0 {
		parts = append(parts, "not ready: "+strings.Join(notReady, ", "))
	}
	if len(beside) > 0 {
		parts = append(parts, "old Pod still serves beside the new one (maxSurge): "+strings.Join(beside, ", "))
	}
	if len(noKubelet) > 0 {
		parts = append(parts, "readiness unknown (no kubelet): "+strings.Join(noKubelet, ", "))
	}
	if len(unknown) > 0 {
		parts = append(parts, "readiness unknown: "+strings.Join(unknown, ", "))
	}
	if s.Missing > 0 {
		missing := fmt.Sprintf("%d node(s) missing (%d expected, %d live)", s.Missing, d.Total, s.Live)
		var gone []string
		for _, n := range s.Nodes {
			if n.State == state.NodeMissing {
				gone = append(gone, n.Node)
			}
		}
		if len(gone) > 0 {
			missing += ": " + strings.Join(gone, ", ") + " no longer heard from"
		}
		parts = append(parts, missing)
	}
	if d.Rollout != nil && len(d.Rollout.Stuck) > 0 {
		parts = append(parts, "rollout stuck at "+strings.Join(d.Rollout.Stuck, ", "))
	}
	for _, e := range d.Errors {
		parts = append(parts, fmt.Sprintf("%s: %s error: %s", e.Node, e.Kind, e.Message))
	}
	d.Summary = strings.Join(parts, "; ")
	switch {
	case problem != "":
		d.State, d.Summary = StateUnknown, problem+" (last published: "+d.Summary+")"
	case len(d.Errors) > 0:
		d.State = StateFailed
	case d.Total == 0 && s.Expected != nil:
		d.State, d.Summary = StateReady, "NodeGroup "+it.Key.NodeGroup+" is configured with 0 nodes: no node runs it"
	case d.Ready == d.Total && s.Missing == 0 && d.Total > 0:
		d.State = StateReady
	case len(unknown) > 0:
		d.State = StateUnknown
	default:
		d.State = StateProgressing
	}
	return d
}

// errorFor reports whether a node's report carries an error for revision
// rev that the node reported knowing rev: the error is about rev, and the
// report was made when the index the node had read named rev. A report
// from before the node read a new commit is not about it, whatever its
// error says.
func errorFor(r state.DeploymentReport, rev string) bool {
	return r.Error != nil && r.Error.Revision == rev && r.Desired == rev
}
