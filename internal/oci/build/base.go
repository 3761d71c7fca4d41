// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package build

import (
	"context"
	"errors"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"podmin.dev/podmin/internal/oci"
)

// StoreBase resolves base images from the local store first and then from
// their registry; with pull set it always asks the registry.
func StoreBase(store *oci.Store, pull bool, opts ...remote.Option) BaseFunc {
	return func(ctx context.Context, ref string, p v1.Platform) (v1.Image, error) {
		refs, err := oci.SourceRefs(ref)
		if err != nil {
			return nil, err
		}
		for _, r := range refs {
			if pull && r.Remote != nil {
				break
			}
			idx, err := store.ImageIndex(r.Repo, r.Tag)
			if errors.Is(err, oci.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			return platformImage(idx, p)
		}
		last := refs[len(refs)-1]
		if last.Remote == nil {
			return nil, fmt.Errorf("%s is not in the local image store: build it first", last)
		}
		o := append(append([]remote.Option{}, opts...), remote.WithContext(ctx), remote.WithPlatform(p))
		img, err := remote.Image(last.Remote, o...)
		if err != nil {
			return nil, fmt.Errorf("fetch %s for %s: %w: check the name and your registry login", last.Remote, p.String(), err)
		}
		return img, nil
	}
}

// platformImage picks p's image from a local index.
func platformImage(idx v1.ImageIndex, p v1.Platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.MediaType.IsImage() && d.Platform.Satisfies(p) {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("the local base image has no %s variant: rebuild or pull it with that platform, or run with --pull", p.String())
}
