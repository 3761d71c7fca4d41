// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"podmin.dev/podmin/internal/objstore"
)

// FromView: the entry the NodeGroup's view lists, and the view is the
// newest evidence (see PlanRebuild).
const FromView = "view"

// nodeGroupView is what one NodeGroup's view can tell a rebuild.
type nodeGroupView struct {
	path    string
	written time.Time
	source  string
	entries map[Key]Entry
	// revisions are what its entries record: a view is the NodeGroup's
	// part of the index, revisions included.
	revisions map[Key][]Revision
	// current: the metadata of the damaged index proves the view is
	// exactly the NodeGroup's entries in the newest index version.
	current bool
	// unusable says why the view is no evidence; "" when it is.
	unusable string
}

// readViews reads every NodeGroup view in the bucket. A view that cannot
// be read, does not decode, carries no source write ID, or that the
// index metadata (meta, of the damaged index; empty without one) shows
// to be stale is kept with the reason it is no evidence: its NodeGroup's
// payloads are then left to the operator's picks, never added.
func readViews(ctx context.Context, store objstore.Store, meta IndexMeta) (map[string]*nodeGroupView, error) {
	infos, err := objstore.ListAll(ctx, store, ViewsPrefix)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", ViewsPrefix, err)
	}
	out := map[string]*nodeGroupView{}
	for _, info := range infos {
		ng := strings.TrimSuffix(strings.TrimPrefix(info.Key, ViewsPrefix), ".json")
		if p, err := ViewPath(ng); err != nil || p != info.Key {
			continue // not a view: nothing of Podmin's
		}
		v := &nodeGroupView{path: info.Key, written: info.LastModified}
		out[ng] = v
		obj, err := store.Get(ctx, info.Key, objstore.GetOptions{})
		switch {
		case errors.Is(err, objstore.ErrNotFound):
			v.unusable = "it was deleted while the rebuild read it"
			continue
		case err != nil:
			v.unusable = fmt.Sprintf("it could not be read (%v)", err)
			continue
		}
		ix, err := decodeView(ng, obj.Data)
		if err != nil {
			v.unusable = fmt.Sprintf("it does not decode (%v)", err)
			continue
		}
		v.entries, v.revisions = map[Key]Entry{}, map[Key][]Revision{}
		for _, it := range ix.Items() {
			v.entries[it.Key] = it.Entry
			if revs := ix.Revisions(it.Key); revs != nil {
				v.revisions[it.Key] = revs
			}
		}
		v.source = obj.Metadata[ViewSourceMeta]
		if !validWriteID(v.source) {
			v.unusable = "it carries no write ID of the index version it was made from (" + ViewSourceMeta + "): it was written by hand, or copied without its metadata"
			continue
		}
		v.current, v.unusable = meta.viewAgainst(ng, v.source, ViewDigest(ng, obj.Data))
	}
	return out, nil
}

// viewAgainst judges a view of nodegroup made from the index version with
// write ID source, whose bytes have digest, by the metadata m of the
// newest index version: current when m proves its bytes are the
// NodeGroup's entries in that version, or why it is stale when m proves
// they are not. Without a proof either way both results are empty, and
// the view's write time is the evidence.
func (m IndexMeta) viewAgainst(nodegroup, source, digest string) (bool, string) {
	if len(m.Chain) == 0 {
		return false, ""
	}
	tag := nodeGroupTag(nodegroup)
	for _, t := range m.hist.touches {
		if t.tag == tag {
			if t.digest == digest {
				return true, ""
			}
			return false, "its bytes do not have the digest the index metadata records for the NodeGroup: it is an older view written late, or it was edited"
		}
	}
	if j := slices.Index(m.Chain, source); j >= 0 && j <= m.hist.horizon {
		return true, ""
	}
	return false, ""
}

// verdict is what the evidence decides for one deployment that has no
// usable entry in the damaged index and no pick.
type verdict struct {
	// entry, when set, is restored (FromView), with the images of its Pod.
	entry  *Entry
	images []string
	// left, when set, is why the deployment is left out.
	left string
	// amb is the choice the evidence leaves to the operator.
	amb *Ambiguity
}

// decideByView applies the newest evidence, the view v of k's NodeGroup
// (nil when there is none), to k's verified Pod payloads cands (newest
// first). A view that lacks k and is newer than every payload of k shows
// k deleted; one that names an intact payload, newer than every other,
// shows that version current. A view the index metadata proves current
// decides whatever the times. Anything else is for the operator to pick:
// a payload written at or after the view (a deploy whose view was not
// written yet, or that never committed: write times of one second cannot
// order them), or no usable view at all.
func decideByView(k Key, cands []podCandidate, v *nodeGroupView, l *Listing, byPath map[string]podCandidate) verdict {
	pick := func(reason string) verdict {
		return verdict{amb: &Ambiguity{Subject: k.String(), Reason: reason, Candidates: candidatesOf(cands), LeaveOut: []Key{k}}}
	}
	if v == nil || v.unusable != "" {
		why := "there is none"
		if v != nil {
			why = v.path + ": " + v.unusable
		}
		if len(cands) == 0 {
			return verdict{}
		}
		if len(cands) > 1 {
			return pick(fmt.Sprintf("%d Pod payloads name it, and no NodeGroup view of %s can tell which is current, or whether it was deleted (%s)", len(cands), k.NodeGroup, why))
		}
		return pick(fmt.Sprintf("it has one Pod payload, and no NodeGroup view of %s can tell whether it was deleted (%s)", k.NodeGroup, why))
	}
	when := fmt.Sprintf("written %s, from index version %s", v.written.UTC().Format(time.RFC3339), v.source)
	notOlder := func(except string) int {
		n := 0
		for _, c := range cands {
			if c.Path != except && !c.Written.Before(v.written) {
				n++
			}
		}
		return n
	}
	e, listed := v.entries[k]
	if !listed {
		if len(cands) == 0 {
			return verdict{}
		}
		if v.current {
			return verdict{left: fmt.Sprintf("deleted: the NodeGroup view %s, which the index metadata proves current, does not list it", v.path)}
		}
		if n := notOlder(""); n > 0 {
			return pick(fmt.Sprintf("the NodeGroup view %s (%s) does not list it, but %d of its Pod payloads were written at or after it: deployed after that view was written, or by a deploy that never committed", v.path, when, n))
		}
		return verdict{left: fmt.Sprintf("deleted: the NodeGroup view %s (%s) does not list it, and its %d Pod payload(s) are older", v.path, when, len(cands))}
	}
	c, ok := byPath[e.Pod]
	if !ok || c.key != k {
		state := "missing from the bucket"
		switch {
		case ok:
			state = "Pod " + c.key.Name
		case l.objects[e.Pod].Key != "":
			state = "corrupt"
		}
		if len(cands) == 0 {
			return verdict{left: fmt.Sprintf("the NodeGroup view %s (%s) names it, but its Pod payload %s is %s and no other Pod payload names it", v.path, when, e.Pod, state)}
		}
		return pick(fmt.Sprintf("the NodeGroup view %s (%s) names Pod payload %s, which is %s: pick another of its payloads, or leave it out", v.path, when, e.Pod, state))
	}
	if n := notOlder(e.Pod); n > 0 && !v.current {
		return pick(fmt.Sprintf("the NodeGroup view %s (%s) names Pod payload %s, but %d other Pod payload(s) were written at or after it", v.path, when, digestShort(e.Pod), n))
	}
	entry := e
	return verdict{entry: &entry, images: c.Images}
}

// digestShort is a payload path with its digest cut to 16 characters.
func digestShort(p string) string {
	if i := strings.Index(p, "/sha512/"); i >= 0 && len(p) > i+8+16 {
		return p[:i+8+16] + "…"
	}
	return p
}
