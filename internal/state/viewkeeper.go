// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"podmin.dev/podmin/internal/objstore"
)

// ViewKeeper keeps the NodeGroup views of one bucket equal to the
// NodeGroups' entries in the index: the coordination leader runs it on
// every index version it reads, so a view a committer did not write (it
// stopped between the index and the view, or a slower committer wrote an
// older one over it) or a view damaged by hand is rewritten within one of
// the leader's polls. It is not safe for concurrent use.
type ViewKeeper struct {
	store objstore.Store
	// good is, per NodeGroup, the digest and ETag of the view last read
	// or written with the right bytes.
	good map[string]viewStamp
}

type viewStamp struct{ digest, etag string }

// NewViewKeeper returns a keeper that has checked nothing yet.
func NewViewKeeper(store objstore.Store) *ViewKeeper {
	return &ViewKeeper{store: store, good: map[string]viewStamp{}}
}

// ViewSync is what one Sync did.
type ViewSync struct {
	// Checked counts the views read; Rewritten those written.
	Checked, Rewritten int
}

// Sync makes the view of every NodeGroup of ix, the index version with
// write ID source, hold its entries, and the view of every NodeGroup seen
// in an earlier version but no longer in ix hold "{}\n". A view already
// found or written with the right bytes is not read again unless full is
// set; full reads every view, conditionally on the ETag it had. A view
// that changed while it was checked is left to the next Sync. Errors are
// joined; one NodeGroup's never stops the others.
func (k *ViewKeeper) Sync(ctx context.Context, ix *Index, source string, full bool) (ViewSync, error) {
	ngs := ix.NodeGroups()
	for ng := range k.good {
		if !slices.Contains(ngs, ng) {
			ngs = append(ngs, ng)
		}
	}
	var res ViewSync
	var errs []error
	for _, ng := range ngs {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		want := ix.NodeGroupView(ng)
		digest := ViewDigest(ng, want)
		known, ok := k.good[ng]
		if ok && known.digest == digest && !full {
			continue
		}
		p, err := ViewPath(ng)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		opts := objstore.GetOptions{}
		if ok && known.digest == digest {
			opts.IfNoneMatch = known.etag
		}
		res.Checked++
		obj, err := k.store.Get(ctx, p, opts)
		put := objstore.PutOptions{Metadata: map[string]string{ViewSourceMeta: source}}
		switch {
		case errors.Is(err, objstore.ErrNotModified):
			continue
		case errors.Is(err, objstore.ErrNotFound):
			put.IfAbsent = true
		case err != nil:
			errs = append(errs, fmt.Errorf("check %s: %w", p, err))
			continue
		case bytes.Equal(obj.Data, want):
			k.good[ng] = viewStamp{digest: digest, etag: obj.ETag}
			continue
		default:
			put.IfMatch = obj.ETag
		}
		if source == "" {
			put.Metadata = nil
		}
		etag, err := objstore.PutWithOptions(ctx, k.store, p, want, put)
		if errors.Is(err, objstore.ErrMetadataUnsupported) {
			put.Metadata = nil
			etag, err = objstore.PutWithOptions(ctx, k.store, p, want, put)
		}
		switch {
		case errors.Is(err, objstore.ErrPrecondition), errors.Is(err, objstore.ErrNotFound):
			k.good[ng] = viewStamp{} // another writer: look again next time
		case err != nil:
			errs = append(errs, fmt.Errorf("rewrite %s: %w", p, err))
		default:
			res.Rewritten++
			k.good[ng] = viewStamp{digest: digest, etag: etag}
		}
	}
	return res, errors.Join(errs...)
}
