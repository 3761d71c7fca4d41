// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/oci"
	ociremote "podmin.dev/podmin/internal/oci/remote"
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
		if _, err = ociremote.Pull(ctx, m.Local, r.Remote, r.Repo, r.Tag, m.Remote...); err != nil {
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

// ErrImageMissing reports a recorded image whose mirror is gone; Publish
// mirrors it again.
var ErrImageMissing = errors.New("mirrored image is missing")

// Check is a PublishOptions.Check: it verifies that the mirrored image's
// index.json tags the recorded digest and lists every manifest the image
// index references, so the read-only registry resolves digest requests
// without walking indexes. Legacy metadata lacking the nested descriptors
// is repaired in place from the image index already in the bucket; no
// blob is uploaded again.
func (m *OCIMirror) Check(ctx context.Context, store objstore.Store, img Image, e ImageEntry) error {
	return CheckMirror(ctx, store, img, e)
}

// CheckMirror is OCIMirror.Check without a local image store.
func CheckMirror(ctx context.Context, store objstore.Store, img Image, e ImageEntry) error {
	dst, err := state.MirrorLayout(img.Registry, img.Repository)
	if err != nil {
		return err
	}
	top, err := v1.NewHash(e.Digest)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Key, err)
	}
	cur, err := store.Get(ctx, dst.IndexFile(), objstore.GetOptions{})
	if errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("%s: %w", dst.IndexFile(), ErrImageMissing)
	}
	if err != nil {
		return err
	}
	idx, err := oci.ParseIndex(cur.Data)
	if err != nil {
		return fmt.Errorf("%s: %w", dst.IndexFile(), err)
	}
	tagged, ok := oci.FindTag(idx, img.Version)
	if !ok || tagged.Digest != top {
		return fmt.Errorf("%s does not tag %s as %s: %w", dst.IndexFile(), img.Version, top, ErrImageMissing)
	}
	blobKey, err := dst.BlobPath(top.String())
	if err != nil {
		return err
	}
	blob, err := store.Get(ctx, blobKey, objstore.GetOptions{})
	if errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("%s: %w", blobKey, ErrImageMissing)
	}
	if err != nil {
		return err
	}
	inner, err := v1.ParseIndexManifest(bytes.NewReader(blob.Data))
	if err != nil {
		return fmt.Errorf("%s: %w", blobKey, err)
	}
	complete := true
	for _, d := range inner.Manifests {
		if _, ok := oci.FindDigest(idx, d.Digest); !ok {
			complete = false
		}
	}
	if complete {
		return nil
	}
	data, err := oci.EncodeIndex(oci.MergeTag(idx, img.Version, tagged, inner.Manifests))
	if err != nil {
		return err
	}
	if _, err := store.PutIfMatch(ctx, dst.IndexFile(), data, cur.ETag); err != nil {
		return fmt.Errorf("repair %s: %w: run setup again", dst.IndexFile(), err)
	}
	return nil
}
