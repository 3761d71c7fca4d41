// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// RollbackResult is what a successful Rollback committed.
type RollbackResult struct {
	DeployResult
	// From is the revision that was current when the index was read
	// (Number 0 when the entry records none).
	From Revision
	// To is the revision whose payloads were committed again.
	To Revision
	// Namespace is the namespace of the restored Pod.
	Namespace string
}

// Rollback commits the payloads of an earlier revision of k again, through
// Deploy: the same payload checks and the same compare-and-swap, so the
// rolled-back state is a new revision like any deploy. toRevision 0 picks
// the newest recorded revision whose payloads differ from the current
// entry's. The payloads are read from the bucket (or the payload cache)
// and verified against the digests in their paths before anything is
// written; one that is missing or corrupt fails the rollback.
func (c *Committer) Rollback(ctx context.Context, k Key, toRevision int) (RollbackResult, error) {
	if _, err := NewKey(k.NodeGroup, k.Name); err != nil {
		return RollbackResult{}, err
	}
	v, err := readIndexVersion(ctx, c.store)
	if err != nil {
		return RollbackResult{}, fmt.Errorf("rollback %q: %w", k, err)
	}
	if !v.exists {
		// Only a new cluster has no index; a lost one is never "no such
		// deployment".
		if err := CheckIndexAbsence(ctx, c.store); err != nil {
			return RollbackResult{}, fmt.Errorf("rollback %q: %w", k, err)
		}
	}
	cur, ok := v.ix.Lookup(k)
	if !ok {
		return RollbackResult{}, fmt.Errorf("rollback %q: %w: the deployment is not in the index: run \"podmin list\" to see deployments", k, ErrNoRevision)
	}
	revs := v.ix.Revisions(k)
	var res RollbackResult
	if len(revs) > 0 && revs[0].Entry() == cur {
		res.From = revs[0]
	} else {
		res.From = Revision{Pod: cur.Pod, Service: cur.Service}
	}
	to, err := pickRevision(k, cur, revs, toRevision)
	if err != nil {
		return RollbackResult{}, err
	}
	res.To = to
	d := Deployment{Key: k}
	if d.Pod, err = FetchPayloadCached(ctx, c.store, c.opts.Cache, to.Pod); err != nil {
		return RollbackResult{}, fmt.Errorf("rollback %q to revision %d: read its Pod payload: %w: nothing was written", k, to.Number, err)
	}
	if d.Namespace, err = podNamespace(d.Pod); err != nil {
		return RollbackResult{}, fmt.Errorf("rollback %q to revision %d: %w: nothing was written", k, to.Number, err)
	}
	res.Namespace = d.Namespace
	if id, ok := to.Entry().ServiceID(); ok {
		d.ServiceName = id.Name
		if d.Service, err = FetchPayloadCached(ctx, c.store, c.opts.Cache, to.Service); err != nil {
			return RollbackResult{}, fmt.Errorf("rollback %q to revision %d: read its Service payload: %w: nothing was written", k, to.Number, err)
		}
	}
	if res.DeployResult, err = c.Deploy(ctx, d); err != nil {
		return RollbackResult{}, err
	}
	return res, nil
}

// pickRevision finds the rollback target among revs.
func pickRevision(k Key, cur Entry, revs []Revision, n int) (Revision, error) {
	if n < 0 {
		return Revision{}, fmt.Errorf("rollback %q: --to-revision must be a revision number (1 or more), not %d", k, n)
	}
	for _, r := range revs {
		if n == 0 && r.Entry() != cur || n != 0 && r.Number == n {
			return r, nil
		}
	}
	if len(revs) == 0 {
		return Revision{}, fmt.Errorf("rollback %q: %w: the entry records no revisions (it was last committed before revisions were recorded): deploy the earlier manifest again instead", k, ErrNoRevision)
	}
	nums := make([]string, len(revs))
	for i, r := range revs {
		nums[i] = strconv.Itoa(r.Number)
	}
	if n == 0 {
		return Revision{}, fmt.Errorf("rollback %q: %w: every recorded revision (%s) has the current payloads: there is nothing earlier to roll back to", k, ErrNoRevision, strings.Join(nums, ", "))
	}
	return Revision{}, fmt.Errorf("rollback %q: %w %d: the entry records revisions %s: run \"podmin history %s -g %s\" to see them", k, ErrNoRevision, n, strings.Join(nums, ", "), k.Name, k.NodeGroup)
}
