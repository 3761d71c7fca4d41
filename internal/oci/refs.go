// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/scrub"
	"podmin.dev/podmin/internal/state"
)

// DefaultTag is the tag of a reference that names none.
const DefaultTag = "latest"

// LocalRef names an image in the local store.
type LocalRef struct {
	// Repo is the local repository, "registry/repository".
	Repo string
	// Tag is the bare tag.
	Tag string
	// Remote is where the image is pulled from; nil for images that only
	// a build creates (the cluster registry is not reachable from here).
	Remote name.Reference
}

// String is Repo:Tag.
func (r LocalRef) String() string { return r.Repo + ":" + r.Tag }

// BuildRef resolves a build tag the way --image values resolve: "hello:v1"
// is registry.podmin.internal/apps/hello:v1 in the local store.
func BuildRef(tag string) (LocalRef, error) {
	resolved, err := manifest.ResolveImage(tag)
	if err != nil {
		return LocalRef{}, fmt.Errorf("build tag %w", err)
	}
	r, _ := manifest.ParseImageRef(resolved)
	if r.Digest != "" {
		return LocalRef{}, fmt.Errorf("build tag %s has a digest: tag the image with a name and an optional tag instead", scrub.Quote(tag))
	}
	return LocalRef{Repo: r.Domain + "/" + r.Path, Tag: orDefault(r.Tag)}, nil
}

// RemoteRef resolves a reference to a remote registry with Docker's
// defaults ("nginx" is index.docker.io/library/nginx:latest).
func RemoteRef(s string) (LocalRef, error) {
	if _, err := manifest.ParseImageRef(s); err != nil {
		return LocalRef{}, fmt.Errorf("%s is not a valid image reference: %w", scrub.Quote(s), err)
	}
	ref, err := name.ParseReference(s)
	if err != nil {
		return LocalRef{}, fmt.Errorf("%s is not a valid image reference: %w", scrub.Quote(s), err)
	}
	t, ok := ref.(name.Tag)
	if !ok {
		return LocalRef{}, fmt.Errorf("%s names a digest only: give it a tag (name:tag) so the local store can name it", scrub.Quote(s))
	}
	return LocalRef{Repo: ref.Context().Name(), Tag: t.TagStr(), Remote: ref}, nil
}

// SourceRefs lists where push looks for SOURCE, in order: a reference
// without a registry is first a locally built image (as "podmin build -t"
// names it), then a Docker Hub image.
func SourceRefs(s string) ([]LocalRef, error) {
	r, err := manifest.ParseImageRef(s)
	if err != nil {
		return nil, fmt.Errorf("%s is not a valid image reference: %w", scrub.Quote(s), err)
	}
	var out []LocalRef
	if r.Domain == "" || r.Domain == manifest.ClusterRegistry {
		if b, err := BuildRef(s); err == nil {
			out = append(out, b)
		}
	}
	if r.Domain != manifest.ClusterRegistry {
		rr, err := RemoteRef(s)
		if err != nil {
			return nil, err
		}
		out = append(out, rr)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s is not a cluster application image: cluster images live under %s/apps/", scrub.Quote(s), manifest.ClusterRegistry)
	}
	return out, nil
}

// ClusterRef is a push destination in the cluster registry.
type ClusterRef struct {
	// Repository is below apps/ ("example/web").
	Repository string
	// Tag is the bare tag.
	Tag string
	// Layout is the repository's layout in the bucket.
	Layout state.OCILayout
}

// String is the reference Pods use, registry.podmin.internal/apps/<repository>:<tag>.
func (c ClusterRef) String() string {
	return manifest.ClusterRegistry + "/" + state.AppsPrefix + c.Repository + ":" + c.Tag
}

var errMirror = errors.New("mirror/ is reserved for setup-managed dependency images: push application images beneath apps/, e.g. hello:v1")

// Destination resolves push's DESTINATION. Shorthand ("hello",
// "hello:v1") resolves beneath registry.podmin.internal/apps/ as --image
// values do. Without a destination the source's registry host is replaced
// by the cluster registry, keeping its repository and tag beneath apps/.
func Destination(source, destination string) (ClusterRef, error) {
	var ref string
	if destination == "" {
		src, err := manifest.ParseImageRef(source)
		if err != nil {
			return ClusterRef{}, fmt.Errorf("%s is not a valid image reference: %w", scrub.Quote(source), err)
		}
		path := src.Path
		if src.Domain == manifest.ClusterRegistry {
			if strings.HasPrefix(path, state.MirrorPrefix) {
				return ClusterRef{}, errMirror
			}
			path = strings.TrimPrefix(path, state.AppsPrefix)
		}
		ref = manifest.ClusterRegistry + "/" + state.AppsPrefix + path + ":" + orDefault(src.Tag)
	} else {
		d, err := manifest.ParseImageRef(destination)
		if err != nil {
			return ClusterRef{}, fmt.Errorf("destination %s is not a valid image reference: %w", scrub.Quote(destination), err)
		}
		if (d.Domain == "" || d.Domain == manifest.ClusterRegistry) && (d.Path+"/" == state.MirrorPrefix || strings.HasPrefix(d.Path, state.MirrorPrefix)) {
			return ClusterRef{}, errMirror
		}
		if d.Digest != "" {
			return ClusterRef{}, fmt.Errorf("destination %s has a digest: give a name and an optional tag; push prints the digest", scrub.Quote(destination))
		}
		if d.Domain != "" && d.Domain != manifest.ClusterRegistry {
			return ClusterRef{}, fmt.Errorf("destination %s is not in the cluster registry: use a shorthand such as hello:v1 or %s/apps/<repository>:<tag>", scrub.Quote(destination), manifest.ClusterRegistry)
		}
		if ref, err = manifest.ResolveImage(destination); err != nil {
			return ClusterRef{}, fmt.Errorf("destination %w", err)
		}
	}
	r, err := manifest.ParseImageRef(ref)
	if err != nil {
		return ClusterRef{}, fmt.Errorf("destination %s: %w", scrub.Quote(ref), err)
	}
	repo, ok := r.ClusterRepository()
	if !ok {
		return ClusterRef{}, fmt.Errorf("destination %s is not beneath %s/apps/", scrub.Quote(ref), manifest.ClusterRegistry)
	}
	l, err := state.AppLayout(repo)
	if err != nil {
		return ClusterRef{}, fmt.Errorf("destination %s: %w", scrub.Quote(ref), err)
	}
	return ClusterRef{Repository: repo, Tag: orDefault(r.Tag), Layout: l}, nil
}

func orDefault(tag string) string {
	if tag == "" {
		return DefaultTag
	}
	return tag
}
