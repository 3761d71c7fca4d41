// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deployments

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/state"
)

// IndexRebuildOptions are the inputs of index rebuild.
type IndexRebuildOptions struct {
	// Pick settles the choices the payloads leave open:
	// "<nodegroup>/<name>=<digest>" (that Pod payload),
	// "<nodegroup>/<name>=none" (leave the deployment out) and
	// "service:<namespace>/<service>=<digest>" (that Service payload); a
	// digest may be a unique prefix of at least 8 characters.
	Pick []string
	// Confirm, when set, is called with the plan before anything is
	// written; an error stops the rebuild with nothing written (the CLI
	// shows the plan and asks the operator here).
	Confirm func(IndexRebuildResult) error
}

// IndexRebuildEntry is one entry of the rebuilt index.
type IndexRebuildEntry struct {
	// Deployment is "<nodegroup>/<name>".
	Deployment string `json:"deployment"`
	// Source is "index" (a readable entry of the corrupt index), "view"
	// (the entry its NodeGroup's view lists, the newest evidence) or
	// "pick".
	Source  string   `json:"source"`
	Pod     string   `json:"pod"`
	Service string   `json:"service"`
	Images  []string `json:"images"`
}

// IndexRebuildDropped is a deployment the rebuild leaves out.
type IndexRebuildDropped struct {
	Deployment string `json:"deployment"`
	Reason     string `json:"reason"`
}

// IndexRebuildResult is the plan of a rebuild and whether it was written.
type IndexRebuildResult struct {
	Bucket string `json:"bucket"`
	// Problem is why the index needed rebuilding.
	Problem string                `json:"problem"`
	Entries []IndexRebuildEntry   `json:"entries"`
	Dropped []IndexRebuildDropped `json:"dropped"`
	// Skipped are objects not used, with why: payloads that are not what
	// their path says, and NodeGroup views that are no evidence.
	Skipped []string `json:"skipped"`
	// Written is true once the rebuilt index was committed.
	Written bool `json:"written"`
}

// Diff renders the plan as a diff of the index: " " an entry of the
// corrupt index kept as it was, "+" an entry restored as its NodeGroup's
// view lists it (or as picked), "-" an entry of the corrupt index, or a
// name found in the payloads or views, left out, with the reason.
func (r IndexRebuildResult) Diff() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bucket %s: %s\n", r.Bucket, r.Problem)
	fmt.Fprintf(&b, "rebuilt index, %d entries:\n", len(r.Entries))
	short := func(p string) string {
		if i := strings.Index(p, "/sha512/"); i >= 0 && len(p) > i+8+16 {
			return p[:i] + "/sha512/" + p[i+8:i+8+16] + "…"
		}
		return p
	}
	for _, e := range r.Entries {
		mark, why := "+", map[string]string{state.FromView: "as the newest view of its NodeGroup lists it", state.FromPick: "picked"}[e.Source]
		if e.Source == "index" {
			mark, why = " ", "readable entry, kept"
		}
		fmt.Fprintf(&b, "%s %s\n    pod %s", mark, e.Deployment, short(e.Pod))
		if e.Service != "" {
			fmt.Fprintf(&b, "\n    service %s", short(e.Service))
		}
		if len(e.Images) > 0 {
			fmt.Fprintf(&b, "\n    images %s", strings.Join(e.Images, ", "))
		}
		fmt.Fprintf(&b, "\n    (%s)\n", why)
	}
	for _, d := range r.Dropped {
		fmt.Fprintf(&b, "- %s\n    (%s)\n", d.Deployment, d.Reason)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(&b, "skipped %s\n", s)
	}
	return b.String()
}

// RebuildIndex reconstructs a corrupt (or missing) deployments/index.json
// from its readable entries and the payloads in the bucket, and writes it
// with a compare-and-swap on the corrupt object's ETag. Where the payloads
// allow more than one index it writes nothing and says which picks settle
// it. A valid index is refused: rebuilding it from the payloads would
// bring back deployments that were deleted.
func RebuildIndex(ctx context.Context, e *openv.Env, opts IndexRebuildOptions) (IndexRebuildResult, error) {
	var picks []state.Pick
	for _, s := range opts.Pick {
		p, err := state.ParsePick(s)
		if err != nil {
			return IndexRebuildResult{}, openv.InvalidArgument(fmt.Errorf("--pick: %w", err))
		}
		picks = append(picks, p)
	}
	c, store, err := e.OpenCluster(ctx)
	if err != nil {
		return IndexRebuildResult{}, err
	}
	e.Progressf("reading deployments/index.json and every payload in bucket %s", c.Bucket)
	plan, err := state.PlanRebuild(ctx, store, e.ClusterCache(c), picks)
	var res IndexRebuildResult
	if plan != nil {
		res = rebuildResult(c.Bucket, plan)
	}
	var amb *state.AmbiguousError
	if errors.As(err, &amb) {
		e.Progressf("%s", res.Diff())
	}
	if err != nil {
		return res, e.Explain(c, err)
	}
	if opts.Confirm != nil {
		if err := opts.Confirm(res); err != nil {
			return res, err
		}
	}
	if err := state.NewCommitter(store, e.ClusterCommitOptions(c)).WriteRebuild(ctx, plan); err != nil {
		return res, e.Explain(c, err)
	}
	res.Written = true
	return res, nil
}

// rebuildResult is the plan as a result document; lists are never nil.
func rebuildResult(bucket string, plan *state.RebuildPlan) IndexRebuildResult {
	res := IndexRebuildResult{Bucket: bucket, Problem: plan.Problem, Entries: []IndexRebuildEntry{}, Dropped: []IndexRebuildDropped{}, Skipped: []string{}}
	for _, en := range plan.Entries {
		images := en.Images
		if images == nil {
			images = []string{}
		}
		res.Entries = append(res.Entries, IndexRebuildEntry{Deployment: en.Key.String(), Source: en.Source, Pod: en.Entry.Pod, Service: en.Entry.Service, Images: images})
	}
	for _, d := range plan.Dropped {
		res.Dropped = append(res.Dropped, IndexRebuildDropped{Deployment: d.Deployment, Reason: d.Reason})
	}
	res.Skipped = append(res.Skipped, plan.Skipped...)
	return res
}
