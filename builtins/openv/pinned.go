// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package openv

import (
	"strings"

	"podmin.dev/podmin/internal/manifest"
)

// The pin lives here, not with the install family, because Env carries an
// override of it that tests set.

// PinnedImage is an upstream multi-platform image Podmin installs at one
// exact index digest; the tag only names it in the mirror.
type PinnedImage struct {
	// Platform is the manifest.PlatformImages entry it belongs to.
	Platform manifest.PlatformImage
	// Tag is the upstream tag the digest was taken from.
	Tag string
	// Digest is the image index digest, "sha256:<hex>".
	Digest string
}

// Upstream splits Platform.Source into its registry host and repository.
func (p PinnedImage) Upstream() (registry, repository string) {
	registry, repository, _ = strings.Cut(p.Platform.Source, "/")
	return registry, repository
}

// Reference is the digest-pinned reference a Pod carries,
// registry.podmin.internal/mirror/<upstream>/<repository>:<tag>@<digest>.
func (p PinnedImage) Reference() string {
	return p.Platform.Repository() + ":" + p.Tag + "@" + p.Digest
}
