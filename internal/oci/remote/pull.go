// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package remote

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"podmin.dev/podmin/internal/oci"
)

// Pull imports the complete remote index ref (every platform) into the
// local store s under repo and tag. A remote single-platform image is
// wrapped in a one-entry OCI index, so the local reference is always an
// index. opts reach go-containerregistry's remote client (keychain,
// transport); the context is added here.
func Pull(ctx context.Context, s *oci.Store, ref name.Reference, repo, tag string, opts ...remote.Option) (v1.Descriptor, error) {
	opts = append(opts, remote.WithContext(ctx))
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("pull %s: %w: check the reference and your registry login (docker login)", ref, err)
	}
	var idx v1.ImageIndex
	if desc.MediaType.IsIndex() {
		if idx, err = desc.ImageIndex(); err != nil {
			return v1.Descriptor{}, fmt.Errorf("pull %s: %w", ref, err)
		}
	} else {
		img, err := desc.Image()
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("pull %s: %w", ref, err)
		}
		if idx, err = SingleIndex(img); err != nil {
			return v1.Descriptor{}, fmt.Errorf("pull %s: %w", ref, err)
		}
	}
	return s.Write(ctx, repo, idx, tag)
}

// SingleIndex wraps one image in an OCI index whose descriptor carries the
// image's platform.
func SingleIndex(img v1.Image) (v1.ImageIndex, error) {
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	p := cfg.Platform()
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}}), nil
}
