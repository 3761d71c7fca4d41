// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"context"
	"errors"
	"fmt"
	"time"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// How a pass learned its NodeGroup's desired state (Result.Read).
const (
	// ReadNone: the index ETag is the applied one; nothing was read.
	ReadNone = "none"
	// ReadMetadata: the index changed, and its metadata proves that the
	// NodeGroup's entries did not (one HEAD, no body).
	ReadMetadata = "metadata"
	// ReadView: the NodeGroup's view, checked against the digest the
	// index metadata records.
	ReadView = "view"
	// ReadIndex: the complete index.
	ReadIndex = "index"
)

// desired is the NodeGroup's desired state at one index version.
type desired struct {
	items []state.Item
	// etag and writeID identify the index version; digest is the view
	// digest of items (state.ViewDigest).
	etag, writeID, digest string
	// unchanged: the applied state is this version's; nothing to do.
	unchanged bool
	read      string
}

// applied is what the last complete pass published from.
type applied struct {
	etag, writeID, digest string
	items                 []state.Item
}

// readDesired learns the NodeGroup's entries at the current index version
// as cheaply as the index proves them: a HEAD of the index, whose
// metadata either proves the entries unchanged since the applied version
// (nothing else is read) or gives the digest the NodeGroup's view must
// have; then that view, and only when there is no proof or the view
// fails its digest, the complete index. restage asks for the items even
// when nothing changed (a forced or retried pass).
func (r *Reconciler) readDesired(ctx context.Context, restage bool) (desired, error) {
	ng := r.opts.NodeGroup
	info, err := r.opts.Store.Head(ctx, state.IndexPath)
	switch {
	case errors.Is(err, objstore.ErrBucketNotFound):
		return desired{}, bucketMissing(err)
	case errors.Is(err, objstore.ErrNotFound):
		return r.absentDesired(ctx, restage)
	case err != nil:
		return desired{}, fmt.Errorf("read %s: %w: check the bucket and the node's access to it", state.IndexPath, err)
	}
	r.seenETag = info.ETag
	if info.Size > MaxIndexBytes {
		return desired{}, tooLarge(state.IndexPath, info.Size, MaxIndexBytes)
	}
	meta := state.ParseIndexMeta(info.Metadata)
	if r.applied && !restage && objstore.SameETag(info.ETag, r.appliedFrom.etag) {
		return desired{etag: info.ETag, writeID: meta.WriteID(), digest: r.appliedFrom.digest, items: r.appliedFrom.items, unchanged: true, read: ReadNone}, nil
	}
	if r.applied {
		if p := meta.NodeGroup(ng, r.appliedFrom.writeID); p.Unchanged || p.Digest != "" && p.Digest == r.appliedFrom.digest {
			return desired{etag: info.ETag, writeID: meta.WriteID(), digest: r.appliedFrom.digest, items: r.appliedFrom.items, unchanged: !restage, read: ReadMetadata}, nil
		}
	}
	if p := meta.NodeGroup(ng, ""); p.Digest != "" {
		items, err := r.readView(ctx, p.Digest, info.ETag)
		if err == nil {
			return desired{etag: info.ETag, writeID: meta.WriteID(), digest: p.Digest, items: items, read: ReadView}, nil
		}
		switch {
		case errors.Is(err, ErrBucketMissing) || ctx.Err() != nil:
			return desired{}, err
		case errors.Is(err, state.ErrViewStale):
			r.log.Debug("NodeGroup view not usable: reading the index", "etag", info.ETag, "err", err)
		default:
			// A view is only a shortcut: failing to read it never
			// stops a pass that the index can answer.
			r.log.Warn("NodeGroup view unreadable: reading the index", "etag", info.ETag, "err", err)
		}
	}
	return r.readIndex(ctx)
}

// DefaultViewWait bounds how long a pass waits for a NodeGroup view to
// catch up with its index before it reads the index instead. A committer
// writes the view right after the index, and the leader rewrites a view
// that is still stale within about a second, so a short wait usually
// saves reading the whole index.
const DefaultViewWait = 1500 * time.Millisecond

// readView reads the NodeGroup's view with the digest the index version
// etag records. A stale view is read again after 100 ms, then after
// three times as long each time, while the index is still at etag and
// Options.ViewWait allows. Every error but a missing bucket leaves the
// caller to read the index; a pass counts a stale view once.
func (r *Reconciler) readView(ctx context.Context, digest, etag string) ([]state.Item, error) {
	wait, waited := 100*time.Millisecond, time.Duration(0)
	for {
		items, err := state.ReadView(ctx, r.opts.Store, r.opts.NodeGroup, digest, MaxIndexBytes)
		switch {
		case err == nil:
			return items, nil
		case errors.Is(err, objstore.ErrBucketNotFound):
			return nil, bucketMissing(err)
		case !errors.Is(err, state.ErrViewStale):
			return nil, err
		}
		if waited == 0 {
			r.counters.add(&r.counters.staleViews)
		}
		if waited+wait > r.opts.ViewWait {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		waited += wait
		wait *= 3
		// A newer index makes this view moot: its digest is stale.
		if info, herr := r.opts.Store.Head(ctx, state.IndexPath); herr != nil || !objstore.SameETag(info.ETag, etag) {
			return nil, err
		}
	}
}

// readIndex reads the complete index: the version it returns may be newer
// than the one a HEAD saw, and it is that version the pass confirms.
func (r *Reconciler) readIndex(ctx context.Context) (desired, error) {
	obj, err := r.opts.Store.Get(ctx, state.IndexPath, objstore.GetOptions{})
	switch {
	case errors.Is(err, objstore.ErrBucketNotFound):
		return desired{}, bucketMissing(err)
	case errors.Is(err, objstore.ErrNotFound):
		return r.absentDesired(ctx, true)
	case err != nil:
		return desired{}, fmt.Errorf("read %s: %w: check the bucket and the node's access to it", state.IndexPath, err)
	}
	r.seenETag = obj.ETag
	if len(obj.Data) > MaxIndexBytes {
		return desired{}, tooLarge(state.IndexPath, int64(len(obj.Data)), MaxIndexBytes)
	}
	ix, err := state.DecodeIndex(obj.Data)
	if err != nil {
		return desired{}, err
	}
	ng := r.opts.NodeGroup
	return desired{etag: obj.ETag, writeID: state.ParseIndexMeta(obj.Metadata).WriteID(), items: ix.NodeGroup(ng),
		digest: state.ViewDigest(ng, ix.NodeGroupView(ng)), read: ReadIndex}, nil
}

// absentDesired is the desired state of an absent index: empty, with an
// empty ETag, only for a node that never had a desired state (see
// absentIndex).
func (r *Reconciler) absentDesired(ctx context.Context, restage bool) (desired, error) {
	if err := r.absentIndex(ctx); err != nil {
		return desired{}, err
	}
	ng := r.opts.NodeGroup
	return desired{digest: state.ViewDigest(ng, []byte("{}\n")), read: ReadIndex,
		unchanged: r.applied && !restage && r.appliedFrom.etag == ""}, nil
}
