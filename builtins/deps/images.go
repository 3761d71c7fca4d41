// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/oci"
	"podmin.dev/podmin/internal/state"
)

// OCIMirror publishes image dependencies beneath mirror/ with the same
// push protocol as "podmin push": blobs first, then oci-layout, then
// index.json (with every nested manifest descriptor) by compare-and-swap.
type OCIMirror struct {
	// Local is the local image store; an image absent there is pulled.
	Local *oci.Store
	// Remote configures pulls (transport, authentication).
	Remote []remote.Option
}

// Mirror is a PublishOptions.Mirror.
func (m *OCIMirror) Mirror(ctx context.Context, store objstore.Store, img Image) (ImageEntry, error) {
	r, err := oci.RemoteRef(img.Source())
	if err != nil {
		return ImageEntry{}, err
	}
	top, err := m.Local.Lookup(r.Repo, r.Tag)
	if errors.Is(err, oci.ErrNotFound) {
		if _, err = m.Local.Pull(ctx, r.Remote, r.Repo, r.Tag, m.Remote...); err != nil {
			return ImageEntry{}, err
		}
		top, err = m.Local.Lookup(r.Repo, r.Tag)
	}
	if err != nil {
		return ImageEntry{}, err
	}
	src, err := m.Local.Source(r.Repo)
	if err != nil {
		return ImageEntry{}, err
	}
	dst, err := state.MirrorLayout(img.Registry, img.Repository)
	if err != nil {
		return ImageEntry{}, err
	}
	if _, err := oci.Push(ctx, store, src, top, dst, img.Version, oci.PushOptions{}); err != nil {
		return ImageEntry{}, fmt.Errorf("mirror %s: %w", img.Source(), err)
	}
	g, err := oci.Walk(ctx, src, top)
	if err != nil {
		return ImageEntry{}, err
	}
	// Walk lists every reachable blob once, manifests included: their
	// sum is the unique compressed content.
	var size int64
	for _, b := range g.Blobs {
		size += b.Size
	}
	return ImageEntry{Version: img.Version, Source: img.Source(), Path: dst.Root(), Digest: top.Digest.String(), Size: size}, nil
}
