// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"podmin.dev/podmin/internal/objstore"
)

var (
	// ErrIndexValid reports a rebuild of an index that decodes: there is
	// nothing to rebuild, and rebuilding from the payloads would bring back
	// deployments that were deleted.
	ErrIndexValid = errors.New("the deployments index is valid")
	// ErrRebuildAmbiguous reports payloads that allow more than one index:
	// the operator must choose (see AmbiguousError).
	ErrRebuildAmbiguous = errors.New("the payloads in the bucket allow more than one index")
	// ErrNothingToRebuild reports a bucket with neither an index nor any
	// payload.
	ErrNothingToRebuild = errors.New("nothing to rebuild")
)

// Where a planned entry comes from.
const (
	// FromIndex: a readable entry of the corrupt index.
	FromIndex = "index"
	// FromPick: the payload the operator picked.
	FromPick = "pick"
)

// RebuildEntry is one entry of a rebuilt index.
type RebuildEntry struct {
	Key   Key
	Entry Entry
	// Source is FromIndex, FromView or FromPick.
	Source string
	// Images are the container images of its Pod, to tell versions apart.
	Images []string
}

// DroppedEntry is a deployment a rebuild leaves out, and why.
type DroppedEntry struct {
	// Deployment is "<nodegroup>/<name>", or the unreadable text.
	Deployment string
	Reason     string
}

// Candidate is one payload a name could be rebuilt from.
type Candidate struct {
	Path   string
	Digest string
	// Written is when the object was last written.
	Written time.Time
	// Images are the container images of a Pod payload.
	Images []string
}

// Ambiguity is one choice the payloads leave open.
type Ambiguity struct {
	// Subject is "<nodegroup>/<name>" or "service:<namespace>/<service>",
	// the left side of the pick that settles it.
	Subject string
	// Reason says what is ambiguous.
	Reason string
	// Candidates are the payloads to choose from (none when the only
	// choice is to leave the deployment out).
	Candidates []Candidate
	// LeaveOut lists deployments one of which may be left out instead.
	LeaveOut []Key
}

// AmbiguousError lists every choice a rebuild needs; it wraps
// ErrRebuildAmbiguous.
type AmbiguousError struct {
	Ambiguities []Ambiguity
}

func (e *AmbiguousError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: choose with --pick (pick= in recipes), then run the rebuild again:", ErrRebuildAmbiguous)
	for _, a := range e.Ambiguities {
		fmt.Fprintf(&b, "\n  %s: %s", a.Subject, a.Reason)
		for _, c := range a.Candidates {
			fmt.Fprintf(&b, "\n    --pick %s=%s", a.Subject, c.Digest[:16])
			if !c.Written.IsZero() {
				fmt.Fprintf(&b, "  written %s", c.Written.UTC().Format(time.RFC3339))
			}
			if len(c.Images) > 0 {
				fmt.Fprintf(&b, "  images %s", strings.Join(c.Images, ","))
			}
		}
		for _, k := range a.LeaveOut {
			fmt.Fprintf(&b, "\n    --pick %s=none", k)
		}
	}
	return b.String()
}

func (e *AmbiguousError) Unwrap() error { return ErrRebuildAmbiguous }

// RebuildPlan is the index a rebuild would write, and how it was derived.
type RebuildPlan struct {
	// Problem is why the index needs rebuilding: its decode error, or that
	// it is missing.
	Problem string
	// Missing is set when there is no index object at all.
	Missing bool
	// Entries are the rebuilt index's entries in key order.
	Entries []RebuildEntry
	// Dropped are deployments of the corrupt index, or found in payloads,
	// that the rebuild leaves out, with the reason.
	Dropped []DroppedEntry
	// Skipped are objects that were not used, with the reason: payloads
	// that are not what their path says (corrupt, unreadable, not a
	// payload path), and NodeGroup views that are no evidence.
	Skipped []string
	// Index is the index the rebuild writes.
	Index *Index
	// base is the version the write is conditional on.
	base indexVersion
	// viewNodeGroups are the NodeGroups that have a view in the bucket:
	// the write makes each of them match the rebuilt index.
	viewNodeGroups []string
}

// podCandidate is a verified Pod payload with what its bytes say.
type podCandidate struct {
	Candidate
	key       Key
	namespace string
	service   string // the podmin.dev/service annotation
}

// PlanRebuild works out the index a rebuild would write from a corrupt (or
// missing) deployments/index.json: the entries of the corrupt index that
// can still be read and whose payloads are present and intact, and, for
// every other name, what the newest evidence in the bucket shows. Every
// Pod payload is read and verified against its digest (through cache when
// its stamp matches); Service payloads are listed, and the chosen ones
// verified.
//
// Payloads are never deleted, so a payload alone does not show that its
// deployment is live. The evidence is each NodeGroup's view
// (deployments/nodegroups/<ng>.json: its entries as the last index write
// or the leader left them, with the write ID of that index version): a
// view written after every Pod payload of a name decides it, restoring the
// version it lists or leaving out the name it does not list (deleted). The
// write times are the store's own, of views and payloads alike. When the
// damage left the index's metadata, it decides instead: a view whose bytes
// have the digest it records for the NodeGroup is current whatever the
// times, and a view with another digest (an older view a slower writer
// wrote late, or one edited by hand) is no evidence. A view without a
// source write ID is no evidence either. What the evidence cannot decide —
// a payload written at or after its view, a NodeGroup without a usable
// view, several payloads no view chooses between, a Service claimed twice
// — is refused with an *AmbiguousError naming the picks that settle it,
// never added silently. A valid index is refused with ErrIndexValid.
//
// One race stays open: a committer that stalls between its index write
// and its view write, while another commits the same NodeGroup, can leave
// an older view written last; the leader repairs it within a second, but
// a rebuild from before that without the index metadata takes it for the
// newest.
func PlanRebuild(ctx context.Context, store objstore.Store, cache PayloadCache, picks []Pick) (*RebuildPlan, error) {
	plan := &RebuildPlan{}
	var meta IndexMeta
	obj, err := store.Get(ctx, IndexPath, objstore.GetOptions{})
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		plan.Missing, plan.Problem = true, IndexPath+" does not exist"
		plan.base = indexVersion{ix: NewIndex()}
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", IndexPath, err)
	default:
		if ix, derr := DecodeIndex(obj.Data); derr == nil {
			return nil, fmt.Errorf("%w: %s decodes with %d deployments: rebuild only replaces an index that does not decode, and rebuilding from the payloads would bring back deleted deployments; nothing was written",
				ErrIndexValid, IndexPath, ix.Len())
		}
		_, perr := decodeIndex(obj.Data)
		plan.Problem = fmt.Sprintf("%s does not decode: %v", IndexPath, perr)
		meta = ParseIndexMeta(obj.Metadata)
		plan.base = indexVersion{etag: obj.ETag, exists: true, chain: meta.Chain}
	}
	readable, revisions, dropped := salvageEntries(obj.Data)
	plan.Dropped = dropped

	listing, err := ListPayloads(ctx, store, []string{NodeGroupsPrefix, ServicesPrefix})
	if err != nil {
		return nil, err
	}
	pods, skipped := readPodCandidates(ctx, store, cache, listing)
	plan.Skipped = skipped
	views, err := readViews(ctx, store, meta)
	if err != nil {
		return nil, err
	}
	for _, ng := range slices.Sorted(maps.Keys(views)) {
		plan.viewNodeGroups = append(plan.viewNodeGroups, ng)
		if why := views[ng].unusable; why != "" {
			plan.Skipped = append(plan.Skipped, fmt.Sprintf("%s: not used as evidence: %s", views[ng].path, why))
		}
	}
	byKey := map[Key][]podCandidate{}
	byPath := map[string]podCandidate{}
	for _, c := range pods {
		byKey[c.key] = append(byKey[c.key], c)
		byPath[c.Path] = c
	}
	if plan.Missing && len(readable) == 0 && len(byKey) == 0 && len(views) == 0 && len(skipped) == 0 {
		return nil, fmt.Errorf("%w: there is no index, no Pod payload and no NodeGroup view in the bucket", ErrNothingToRebuild)
	}

	podPicks, svcPicks := map[Key]Pick{}, map[ServiceID]Pick{}
	used := map[string]bool{}
	for _, p := range picks {
		if p.IsService {
			svcPicks[p.Service] = p
		} else {
			podPicks[p.Key] = p
		}
	}
	var amb []Ambiguity
	keys := map[Key]bool{}
	for k := range readable {
		keys[k] = true
	}
	for k := range byKey {
		keys[k] = true
	}
	for _, v := range views {
		if v.unusable == "" {
			for k := range v.entries {
				keys[k] = true
			}
		}
	}
	for _, k := range sortedKeys(keys) {
		pick, picked := podPicks[k]
		if picked {
			used[pick.String()] = true
		}
		if picked && pick.None {
			plan.Dropped = append(plan.Dropped, DroppedEntry{Deployment: k.String(), Reason: "left out by --pick " + pick.String()})
			continue
		}
		cands := byKey[k]
		slices.SortFunc(cands, func(a, b podCandidate) int { return b.Written.Compare(a.Written) })
		var chosen *podCandidate
		source := FromPick
		switch {
		case picked:
			var matches []podCandidate
			for _, c := range cands {
				if strings.HasPrefix(c.Digest, pick.Digest) {
					matches = append(matches, c)
				}
			}
			if len(matches) != 1 {
				reason := fmt.Sprintf("--pick %s matches %d of its %d Pod payloads", pick, len(matches), len(cands))
				amb = append(amb, Ambiguity{Subject: k.String(), Reason: reason, Candidates: candidatesOf(cands)})
				continue
			}
			chosen = &matches[0]
		case readable[k] != nil:
			e := *readable[k]
			if reason := checkReadable(ctx, store, cache, listing, byPath, k, e); reason != "" {
				plan.Dropped = append(plan.Dropped, DroppedEntry{Deployment: k.String(), Reason: "readable entry not used: " + reason})
				break
			}
			plan.Entries = append(plan.Entries, RebuildEntry{Key: k, Entry: e, Source: FromIndex, Images: byPath[e.Pod].Images})
			continue
		}
		if chosen == nil {
			v := decideByView(k, cands, views[k.NodeGroup], listing, byPath)
			switch {
			case v.amb != nil:
				amb = append(amb, *v.amb)
				continue
			case v.left != "":
				plan.Dropped = append(plan.Dropped, DroppedEntry{Deployment: k.String(), Reason: v.left})
				continue
			case v.entry == nil:
				continue // a readable entry that could not be used, and no payload
			}
			entry := *v.entry
			if id, ok := entry.ServiceID(); ok {
				if _, picked := svcPicks[id]; picked {
					svc, a := chooseService(ctx, store, cache, listing, id, svcPicks, used, k)
					if a != nil {
						amb = append(amb, *a)
						continue
					}
					entry.Service = svc
				} else if err := VerifyListed(ctx, store, cache, listing, entry.Service); err != nil {
					amb = append(amb, Ambiguity{Subject: k.String(), Reason: fmt.Sprintf("the Service payload its NodeGroup's view names is unusable (%v); leave the deployment out", err), LeaveOut: []Key{k}})
					continue
				}
			}
			plan.Entries = append(plan.Entries, RebuildEntry{Key: k, Entry: entry, Source: FromView, Images: v.images})
			if vw := views[k.NodeGroup]; vw != nil && vw.entries[k] == entry && vw.revisions[k] != nil && revisions[k] == nil {
				// The view lists this very entry: its revisions are the
				// entry's history as that index version recorded it.
				revisions[k] = vw.revisions[k]
			}
			continue
		}
		entry := Entry{Pod: chosen.Path}
		if chosen.service != "" {
			id := ServiceID{Namespace: chosen.namespace, Name: chosen.service}
			svc, a := chooseService(ctx, store, cache, listing, id, svcPicks, used, k)
			if a != nil {
				amb = append(amb, *a)
				continue
			}
			entry.Service = svc
		}
		plan.Entries = append(plan.Entries, RebuildEntry{Key: k, Entry: entry, Source: source, Images: chosen.Images})
	}
	for _, p := range picks {
		if !used[p.String()] {
			return nil, fmt.Errorf("--pick %s matches nothing to choose: the payloads of the bucket do not need it (or name it differently)", p)
		}
	}
	slices.SortStableFunc(plan.Dropped, func(a, b DroppedEntry) int { return strings.Compare(a.Deployment, b.Deployment) })
	// One owner per Service identity.
	ix := NewIndex()
	owners := map[ServiceID][]Key{}
	for _, e := range plan.Entries {
		if id, ok := e.Entry.ServiceID(); ok {
			owners[id] = append(owners[id], e.Key)
		}
	}
	for id, ks := range owners {
		if len(ks) > 1 {
			amb = append(amb, Ambiguity{Subject: "service:" + id.String(), Reason: fmt.Sprintf("claimed by %d deployments; leave all but one out", len(ks)), LeaveOut: ks})
		}
	}
	if len(amb) > 0 {
		slices.SortFunc(amb, func(a, b Ambiguity) int { return strings.Compare(a.Subject, b.Subject) })
		return plan, &AmbiguousError{Ambiguities: amb}
	}
	for _, e := range plan.Entries {
		if _, _, err := ix.Set(e.Key, e.Entry); err != nil {
			return nil, err
		}
		if revs := revisions[e.Key]; revs != nil {
			if ix.history == nil {
				ix.history = map[Key][]Revision{}
			}
			ix.history[e.Key] = revs
		}
	}
	plan.Index = ix
	return plan, nil
}

// WriteRebuild writes a plan's index, conditional on the version the plan
// was made from: If-Match on the corrupt object's ETag (create-only when
// there was none), with a fresh write ID. A changed index fails: the plan
// is stale. A write whose reply is lost is resolved by reading back: its
// write ID proves it landed; the corrupt object still there (same write
// ID, or without IDs the same ETag and still undecodable: no Podmin writer
// writes an index that does not decode) proves it did not, and it is
// written again; anything else is ErrOutcomeUnknown.
func (c *Committer) WriteRebuild(ctx context.Context, plan *RebuildPlan) error {
	if plan.Index == nil {
		return errors.New("the rebuild plan is incomplete: settle its choices first")
	}
	data := plan.Index.Encode()
	// The base could not be read, so which NodeGroups changed is unknown:
	// the write records the views of the rebuilt ones and of those that
	// had a view, but nothing about the others.
	ngs := plan.Index.NodeGroups()
	for _, ng := range plan.viewNodeGroups {
		if !slices.Contains(ngs, ng) {
			ngs = append(ngs, ng)
		}
	}
	ch := changeOf(plan.Index, true, ngs...)
	var lastErr error
	for range 3 {
		id := c.opts.NewWriteID()
		kept, err := c.writeIndex(ctx, plan.base, data, id, ch)
		switch {
		case err == nil:
			if kept {
				// Every view follows the rebuilt index, those of the
				// NodeGroups it no longer has included: a view left
				// naming what the rebuild left out would be evidence for
				// it in a later rebuild.
				for _, ng := range ngs {
					_ = writeView(ctx, c.store, ng, plan.Index.NodeGroupView(ng), id)
				}
			}
			return nil
		case errors.Is(err, objstore.ErrPrecondition), errors.Is(err, objstore.ErrNotFound):
			return fmt.Errorf("write %s: the index changed since the plan was made, so nothing was written: run the rebuild again to plan against it: %w", IndexPath, err)
		case errors.Is(err, objstore.ErrNotApplied):
			return fmt.Errorf("write %s: %w: nothing was written; run the rebuild again", IndexPath, err)
		}
		lastErr = err
		obj, rerr := c.store.Get(ctx, IndexPath, objstore.GetOptions{})
		switch {
		case errors.Is(rerr, objstore.ErrNotFound) && !plan.base.exists:
			continue // still absent: it did not land
		case rerr != nil:
			return fmt.Errorf("write %s: %w: %w; reading it back failed too (%w): run \"podmin list\" to see whether it was rebuilt", IndexPath, ErrOutcomeUnknown, err, rerr)
		}
		chain := chainFrom(obj.Metadata)
		if slices.Contains(chain, id) {
			return nil
		}
		if _, derr := DecodeIndex(obj.Data); derr != nil && plan.base.exists &&
			(len(plan.base.chain) > 0 && len(chain) > 0 && chain[0] == plan.base.chain[0] ||
				len(plan.base.chain) == 0 && objstore.SameETag(obj.ETag, plan.base.etag)) {
			continue // the corrupt version is still there: it did not land
		}
		return fmt.Errorf("write %s: %w: %w: another writer changed the index meanwhile: run \"podmin list\" to see whether it was rebuilt", IndexPath, ErrOutcomeUnknown, err)
	}
	return fmt.Errorf("write %s: gave up after 3 attempts, none of which landed: %w", IndexPath, lastErr)
}
