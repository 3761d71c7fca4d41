// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deployments

import (
	"context"
	"errors"
	"fmt"

	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/state"
)

// HistoryOptions are the inputs of history.
type HistoryOptions struct {
	Name      string
	NodeGroup string
}

// RevisionInfo is one recorded revision of a deployment.
type RevisionInfo struct {
	// Revision counts the deployment's revisions from 1.
	Revision int `json:"revision"`
	// Current marks the newest revision, when the entry holds its
	// payloads now.
	Current bool `json:"current"`
	// Pod and ServicePath are the revision's payloads.
	Pod         string `json:"pod"`
	ServicePath string `json:"servicePath,omitempty"`
	// PodRevision is the podmin.dev/revision nodes derive from them.
	PodRevision string `json:"podRevision"`
	// Images are the Pod's images; empty when unknown (a revision
	// committed before revisions were recorded).
	Images []string `json:"images"`
	// Time is when its index write was made (RFC 3339), empty when
	// unknown; Write is that write's ID.
	Time  string `json:"time,omitempty"`
	Write string `json:"write,omitempty"`
}

// HistoryResult lists a deployment's recorded revisions, newest first.
type HistoryResult struct {
	Name      string         `json:"name"`
	NodeGroup string         `json:"nodegroup"`
	Revisions []RevisionInfo `json:"revisions"`
}

// ErrNoRevision reports a rollback target the deployment's history does
// not hold (state.ErrNoRevision).
var ErrNoRevision = state.ErrNoRevision

// History lists the revisions the deployment's index entry records. A
// deployment that is not in the index fails with ErrNoDeployment.
func History(ctx context.Context, e *openv.Env, opts HistoryOptions) (HistoryResult, error) {
	key, err := historyKey(opts.NodeGroup, opts.Name)
	if err != nil {
		return HistoryResult{}, err
	}
	c, store, err := e.OpenCluster(ctx)
	if err != nil {
		return HistoryResult{}, err
	}
	// A lost index is refused (state.ErrIndexMissing), never read as a
	// deployment without history.
	ix, _, err := state.ReadDesiredIndex(ctx, store)
	if errors.Is(err, state.ErrIndexMissing) {
		return HistoryResult{}, err
	}
	if err != nil {
		return HistoryResult{}, e.Explain(c, err)
	}
	cur, ok := ix.Lookup(key)
	if !ok {
		return HistoryResult{}, fmt.Errorf("%w: deployment %s is not in the deployment index: run \"podmin list\" to see deployments", ErrNoDeployment, key)
	}
	res := HistoryResult{Name: key.Name, NodeGroup: key.NodeGroup, Revisions: []RevisionInfo{}}
	for i, r := range ix.Revisions(key) {
		info := revisionInfo(r, cur)
		// An earlier revision with the same payloads (the one a rollback
		// restored) is not the current one: the newest is.
		info.Current = info.Current && i == 0
		res.Revisions = append(res.Revisions, info)
	}
	if len(res.Revisions) == 0 || res.Revisions[0].Pod != cur.Pod || res.Revisions[0].ServicePath != cur.Service {
		// The current entry predates the recorded revisions: shown
		// first, without a number, as it is not recorded.
		res.Revisions = append([]RevisionInfo{revisionInfo(state.Revision{Pod: cur.Pod, Service: cur.Service}, cur)}, res.Revisions...)
	}
	return res, nil
}

func revisionInfo(r state.Revision, cur state.Entry) RevisionInfo {
	images := r.Images
	if images == nil {
		images = []string{}
	}
	return RevisionInfo{Revision: r.Number, Current: r.Entry() == cur, Pod: r.Pod, ServicePath: r.Service,
		PodRevision: nodepod.Revision(r.Entry()), Images: images, Time: r.Time, Write: r.Write}
}

func historyKey(nodegroup, name string) (state.Key, error) {
	if err := ids.ValidateNodeGroup(nodegroup); err != nil {
		return state.Key{}, openv.InvalidArgument(fmt.Errorf("--nodegroup: %w", err))
	}
	key, err := state.NewKey(nodegroup, name)
	if err != nil {
		return state.Key{}, openv.InvalidArgument(err)
	}
	return key, nil
}

// RollbackOptions are the inputs of rollback.
type RollbackOptions struct {
	Name      string
	NodeGroup string
	// ToRevision is the revision to restore; 0 is the newest recorded one
	// whose payloads differ from the current entry's.
	ToRevision int
	// Wait waits after the commit as deploy --wait does.
	Wait string
}

// RollbackResult reports a rollback: the deploy it made, and which
// revisions it went from and to.
type RollbackResult struct {
	DeployResult
	// From is the revision that was current (0 when not recorded), To the
	// revision whose payloads were committed again.
	From int `json:"from"`
	To   int `json:"to"`
}

// Rollback commits an earlier revision's payloads again through the
// ordinary compare-and-swap commit (state.Committer.Rollback, which goes
// through Deploy), and with Wait waits as deploy --wait does. A target the
// history does not hold fails with ErrNoRevision before anything is
// written.
func Rollback(ctx context.Context, e *openv.Env, opts RollbackOptions) (RollbackResult, error) {
	key, err := historyKey(opts.NodeGroup, opts.Name)
	if err != nil {
		return RollbackResult{}, err
	}
	if opts.ToRevision < 0 {
		return RollbackResult{}, openv.InvalidArgument(fmt.Errorf("--to-revision must be a revision number (1 or more, see \"podmin history %s -g %s\"), not %d", key.Name, key.NodeGroup, opts.ToRevision))
	}
	wopts := WaitOptions{Name: opts.Name, NodeGroup: opts.NodeGroup, Until: opts.Wait}
	if opts.Wait != "" {
		if err := checkWait(&wopts); err != nil {
			return RollbackResult{}, openv.InvalidArgument(err)
		}
	}
	c, store, err := e.OpenCluster(ctx)
	if err != nil {
		return RollbackResult{}, err
	}
	r, err := state.NewCommitter(store, e.ClusterCommitOptions(c)).Rollback(ctx, key, opts.ToRevision)
	if err != nil {
		if errors.Is(err, state.ErrNoRevision) || errors.Is(err, state.ErrIndexMissing) {
			return RollbackResult{}, err
		}
		return RollbackResult{}, e.Explain(c, err)
	}
	if r.Outcome != state.Unchanged {
		e.Progressf("committed %s revision %d again to bucket %s (%s)", key, r.To.Number, c.Bucket, r.Outcome)
	}
	ns, svc := r.Namespace, ""
	if id, ok := r.Entry.ServiceID(); ok {
		svc = id.Name
	}
	res := RollbackResult{From: r.From.Number, To: r.To.Number, DeployResult: DeployResult{
		Name: key.Name, NodeGroup: key.NodeGroup, Namespace: ns, Service: svc, Action: string(r.Outcome),
		Pod: r.Entry.Pod, ServicePath: r.Entry.Service, Bucket: c.Bucket, Repaired: r.Repaired,
		Revision: nodepod.Revision(r.Entry), Warnings: []openv.Warning{},
	}}
	if opts.Wait != "" {
		wopts.Revision = res.Revision
		wopts.newRevision = r.Outcome == state.Created || r.Outcome == state.Updated
		w, err := wait(ctx, e, store, wopts)
		res.Wait = &w
		if err != nil {
			return res, fmt.Errorf("%s rolled back to revision %d (revision %s committed), but the wait failed: %w", key, r.To.Number, short(res.Revision), waitError(e, c, err))
		}
	}
	return res, nil
}
