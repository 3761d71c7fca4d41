// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package install

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/oci"
	ociremote "podmin.dev/podmin/internal/oci/remote"
	"podmin.dev/podmin/internal/state"
)

// platformImage returns the PlatformImages entry called n; a missing one
// is a programming error caught by the tests.
func platformImage(n string) manifest.PlatformImage {
	for _, p := range manifest.PlatformImages() {
		if p.Name == n {
			return p
		}
	}
	panic("no platform image " + n)
}

// MirrorResult reports the mirror step of an install.
type MirrorResult struct {
	// Repository is the mirror's bucket layout, mirror/<upstream>/<repository>.
	Repository string `json:"repository"`
	// Digest is the pinned index digest.
	Digest string `json:"digest"`
	// Action is "reused" when the mirror index already named the digest
	// and every blob of the image was in place (nothing was written),
	// "repaired" when it named the digest but a blob was missing or
	// damaged and was written again, else "mirrored".
	Action string `json:"action"`
	// Uploaded counts blobs written now.
	Uploaded int `json:"uploaded"`
}

// upstreamRef is where the pinned digest is fetched from: its own
// registry, or the replacement UpstreamRegistries names for it.
func upstreamRef(e *openv.Env, p openv.PinnedImage) (name.Reference, error) {
	registry, repository := p.Upstream()
	if alt, ok := e.UpstreamRegistries[registry]; ok {
		registry = alt
	}
	return name.NewDigest(registry + "/" + repository + "@" + p.Digest)
}

// mirrorPinned makes the bucket's mirror layout of p name its pinned digest
// under its tag. A mirror whose index.json already tags the digest is
// reused once its blobs are proven in place (the manifests read and
// verified, one Head for every other blob); otherwise the image comes from
// the local image cache, or the upstream registry when the cache lacks it,
// and is pushed blobs first, index.json last.
func mirrorPinned(ctx context.Context, e *openv.Env, bucket objstore.Store, p openv.PinnedImage) (MirrorResult, error) {
	registry, repository := p.Upstream()
	layout, err := state.MirrorLayout(registry, repository)
	if err != nil {
		return MirrorResult{}, err
	}
	want, err := v1.NewHash(p.Digest)
	if err != nil {
		return MirrorResult{}, fmt.Errorf("pinned digest of %s: %w", p.Platform.Name, err)
	}
	res := MirrorResult{Repository: layout.Root(), Digest: p.Digest}
	repair := false
	cur, err := bucket.Get(ctx, layout.IndexFile(), objstore.GetOptions{})
	switch {
	case err == nil:
		m, err := oci.ParseIndex(cur.Data)
		if err != nil {
			return res, fmt.Errorf("%s: %w", layout.IndexFile(), err)
		}
		if d, ok := oci.FindTag(m, p.Tag); ok && d.Digest == want {
			// The tag does not vouch for the blobs below it.
			problems, err := oci.CheckPublished(ctx, bucket, layout, d)
			if err != nil {
				return res, fmt.Errorf("check the mirror %s: %w: nothing was changed; run the install again", layout.Root(), err)
			}
			if len(problems) == 0 {
				res.Action = "reused"
				return res, nil
			}
			e.Progressf("mirror %s tags %s, but %s: mirroring it again", layout.Root(), p.Digest, joinProblems(problems))
			repair = true
		}
	case !errors.Is(err, objstore.ErrNotFound):
		return res, fmt.Errorf("read %s: %w", layout.IndexFile(), err)
	}
	store := e.ImageStore()
	local := registry + "/" + repository
	top, err := store.Lookup(local, p.Tag)
	if err != nil || top.Digest != want {
		ref, err := upstreamRef(e, p)
		if err != nil {
			return res, err
		}
		e.Progressf("pulling %s", ref)
		if top, err = ociremote.Pull(ctx, store, ref, local, p.Tag, e.RemoteOptions()...); err != nil {
			return res, err
		}
		if top.Digest != want {
			return res, fmt.Errorf("%s served index %s, not the pinned %s: nothing was mirrored", ref, top.Digest, p.Digest)
		}
	}
	src, err := store.Source(local)
	if err != nil {
		return res, err
	}
	pr, err := oci.Push(ctx, bucket, src, top, layout, p.Tag, oci.PushOptions{
		Progress: func(pp oci.PushProgress) {
			e.Progressf("mirroring %s: %d/%d blobs, %d uploaded (%d bytes)", p.Platform.Source, pp.Done, pp.Total, pp.Uploaded, pp.Bytes)
		},
	})
	if err != nil {
		return res, fmt.Errorf("mirror %s to %s: %w", p.Platform.Source, layout.Root(), err)
	}
	res.Action, res.Uploaded = "mirrored", pr.Uploaded
	if repair {
		// Push skips a blob of the right size whose content the store
		// cannot vouch for: say so rather than claim a repair.
		problems, err := oci.CheckPublished(ctx, bucket, layout, top)
		if err != nil {
			return res, fmt.Errorf("check the mirror %s after mirroring again: %w: run the install again", layout.Root(), err)
		}
		if len(problems) > 0 {
			return res, fmt.Errorf("mirror %s still cannot serve %s after mirroring it again: %s: delete the damaged blobs and run the install again", layout.Root(), p.Digest, joinProblems(problems))
		}
		res.Action = "repaired"
	}
	return res, nil
}

// joinProblems names the first problems CheckPublished found and counts
// the rest.
func joinProblems(problems []string) string {
	const shown = 3
	if len(problems) <= shown {
		return strings.Join(problems, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(problems[:shown], "; "), len(problems)-shown)
}
