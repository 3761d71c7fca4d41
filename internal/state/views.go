// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"podmin.dev/podmin/internal/objstore"
)

// ViewsPrefix holds the NodeGroup views: derived, non-authoritative copies
// of each NodeGroup's entries (see the package documentation).
const ViewsPrefix = "deployments/nodegroups/"

// ViewSourceMeta is the object metadata of a view naming the write ID of
// the index version it was derived from. It is informational: a view is
// trusted only through the digest the index records.
const ViewSourceMeta = "podmin-view-source"

// viewDigestLen is the length of a view digest: 8 bytes of SHA-256 in hex.
const viewDigestLen = 16

// ErrViewStale reports a view that is not the NodeGroup's entries of the
// index version asked about: missing, older or newer, or damaged. Readers
// then read the index itself.
var ErrViewStale = errors.New("the NodeGroup view does not match the index")

// ViewPath is deployments/nodegroups/<nodegroup>.json.
func ViewPath(nodegroup string) (string, error) {
	if err := validateNodeGroup(nodegroup); err != nil {
		return "", err
	}
	return ViewsPrefix + nodegroup + ".json", nil
}

// NodeGroupView is the view of one NodeGroup: the index restricted to its
// entries, in the index's canonical form ("{}\n" when it has none).
func (ix *Index) NodeGroupView(nodegroup string) []byte {
	if ix.raw != nil && len(ix.dirty) == 0 {
		lo, hi := ix.raw.prefixRange(nodegroup + "/")
		if lo == hi {
			return []byte("{}\n")
		}
		b := make([]byte, 0, ix.raw.spans[hi-1][1]-ix.raw.spans[lo][0]+6)
		b = append(b, "{\n"...)
		b = append(b, ix.raw.text[ix.raw.spans[lo][0]:ix.raw.spans[hi-1][1]]...)
		return append(b, "\n}\n"...)
	}
	return ix.encodeItems(ix.NodeGroup(nodegroup))
}

// NodeGroups lists the NodeGroups that have entries, in key order.
func (ix *Index) NodeGroups() []string {
	var out []string
	for _, it := range ix.Items() {
		if len(out) == 0 || out[len(out)-1] != it.Key.NodeGroup {
			out = append(out, it.Key.NodeGroup)
		}
	}
	return out
}

// ViewDigest is the digest the index metadata records for a NodeGroup's
// view: 16 hex characters of SHA-256 over the NodeGroup and the view's
// bytes. The NodeGroup is part of it because every empty view has the
// same bytes.
func ViewDigest(nodegroup string, view []byte) string {
	h := sha256.New()
	h.Write([]byte("podmin nodegroup view\x00" + nodegroup + "\x00"))
	h.Write(view)
	return hex.EncodeToString(h.Sum(nil))[:viewDigestLen]
}

// DecodeView decodes a view of nodegroup that the caller has checked
// against its digest: a valid index whose every entry is of nodegroup.
func DecodeView(nodegroup string, data []byte) ([]Item, error) {
	ix, err := decodeView(nodegroup, data)
	if err != nil {
		return nil, err
	}
	return ix.Items(), nil
}

// decodeView is DecodeView that returns the view as an index, with the
// revisions its entries record.
func decodeView(nodegroup string, data []byte) (*Index, error) {
	ix, err := DecodeIndex(data)
	if err != nil {
		return nil, err
	}
	for _, it := range ix.Items() {
		if it.Key.NodeGroup != nodegroup {
			return nil, fmt.Errorf("%w: the view of NodeGroup %s holds deployment %s", ErrViewStale, nodegroup, it.Key)
		}
	}
	return ix, nil
}

// ReadView reads the view of nodegroup and returns its entries when its
// bytes have the digest an index version records for the NodeGroup
// (IndexMeta.NodeGroup), and an error wrapping ErrViewStale when they do
// not (a missing view included). Bytes over maxBytes are refused unread
// beyond the limit's check. It costs one GET.
func ReadView(ctx context.Context, store objstore.Store, nodegroup, digest string, maxBytes int) ([]Item, error) {
	p, err := ViewPath(nodegroup)
	if err != nil {
		return nil, err
	}
	obj, err := store.Get(ctx, p, objstore.GetOptions{})
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return nil, fmt.Errorf("%w: %s is missing", ErrViewStale, p)
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", p, err)
	case len(obj.Data) > maxBytes:
		return nil, fmt.Errorf("%w: %s holds %d bytes, more than the %d byte limit", ErrViewStale, p, len(obj.Data), maxBytes)
	}
	if got := ViewDigest(nodegroup, obj.Data); got != digest {
		return nil, fmt.Errorf("%w: %s has digest %s, the index records %s", ErrViewStale, p, got, digest)
	}
	items, err := DecodeView(nodegroup, obj.Data)
	if err != nil {
		// Its digest matched, so the committed view itself is invalid:
		// the index it came from decodes, so this cannot happen unless
		// the digest collides.
		return nil, fmt.Errorf("%w: %s: %w", ErrViewStale, p, err)
	}
	return items, nil
}

// writeView stores the view of nodegroup derived from the index version
// with write ID source. It is unconditional: a view never decides
// anything on its own, and a stale one (a slower writer's) is caught by
// its digest and repaired by the leader.
func writeView(ctx context.Context, store objstore.Store, nodegroup string, view []byte, source string) error {
	p, err := ViewPath(nodegroup)
	if err != nil {
		return err
	}
	opts := objstore.PutOptions{}
	if source != "" {
		opts.Metadata = map[string]string{ViewSourceMeta: source}
	}
	_, err = objstore.PutWithOptions(ctx, store, p, view, opts)
	if errors.Is(err, objstore.ErrMetadataUnsupported) {
		_, err = store.Put(ctx, p, view)
	}
	return err
}
