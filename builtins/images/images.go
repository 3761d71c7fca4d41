// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package images

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/oci"
	"podmin.dev/podmin/internal/oci/build"
	ociremote "podmin.dev/podmin/internal/oci/remote"
	"podmin.dev/podmin/internal/scrub"
)

// BuildOptions are the arguments of build.
type BuildOptions struct {
	// Tag names the image; repeatable. "hello:v1" is shorthand for
	// registry.podmin.internal/apps/hello:v1, as with --image.
	Tag []string `json:"tag"`
	// Platform lists OS/ARCH[/VARIANT] values; empty builds linux/<host arch>.
	Platform []string `json:"platform,omitempty"`
	// File is the Containerfile; empty means PATH/Containerfile or PATH/Dockerfile.
	File string `json:"file,omitempty"`
	// Pull fetches base images from their registry even when stored locally.
	Pull bool `json:"pull,omitempty"`
	// Path is the build context directory; empty means ".".
	Path string `json:"path,omitempty"`
}

// ImageResult describes an image index in the local store or the cluster.
type ImageResult struct {
	// References name the image ("registry.podmin.internal/apps/hello:v1").
	References []string `json:"references"`
	// Digest is the image index digest.
	Digest string `json:"digest"`
	// Platforms lists the index's platforms in index order.
	Platforms []string `json:"platforms"`
}

// PushResult reports a push.
type PushResult struct {
	ImageResult
	// Bucket is the cluster bucket written to.
	Bucket string `json:"bucket"`
	// Blobs counts the blobs the image references; Uploaded those written now.
	Blobs         int   `json:"blobs"`
	Uploaded      int   `json:"uploaded"`
	UploadedBytes int64 `json:"uploadedBytes"`
}

// PullOptions are the arguments of pull.
type PullOptions struct {
	// Source is the remote reference, with Docker's defaults.
	Source string `json:"source"`
}

// PushOptions are the arguments of push.
type PushOptions struct {
	// Source is a locally built or pulled image, pulled when absent.
	Source string `json:"source"`
	// Destination is the cluster reference; shorthand resolves beneath
	// registry.podmin.internal/apps/. Empty keeps the source's repository
	// and tag beneath apps/.
	Destination string `json:"destination,omitempty"`
	// Pull refreshes the local copy from the source registry first.
	Pull bool `json:"pull,omitempty"`
}

// CheckBuild applies the rules of build that need nothing but its options
// (tags and platforms): the CLI reports them as bad usage.
func CheckBuild(opts BuildOptions) error {
	_, _, err := buildTargets(opts)
	return err
}

// buildTargets parses the tags and platforms of a build.
func buildTargets(opts BuildOptions) ([]oci.LocalRef, []v1.Platform, error) {
	if len(opts.Tag) == 0 {
		return nil, nil, errors.New("build needs a name: pass --tag NAME[:TAG], e.g. --tag hello:v1")
	}
	refs := make([]oci.LocalRef, len(opts.Tag))
	for i, t := range opts.Tag {
		r, err := oci.BuildRef(t)
		if err != nil {
			return nil, nil, err
		}
		refs[i] = r
	}
	platforms, err := parsePlatforms(opts.Platform)
	return refs, platforms, err
}

// Build builds the Containerfile subset into the local image store.
func Build(ctx context.Context, e *openv.Env, opts BuildOptions) (ImageResult, error) {
	refs, platforms, err := buildTargets(opts)
	if err != nil {
		return ImageResult{}, openv.InvalidArgument(err)
	}
	dir := opts.Path
	if dir == "" {
		dir = "."
	}
	file := opts.File
	if file != "" {
		if file, err = e.ReadPath(e.Path(file)); err != nil {
			return ImageResult{}, fmt.Errorf("build: %w", err)
		}
	}
	contextDir, err := e.ReadPath(e.Path(dir))
	if err != nil {
		return ImageResult{}, fmt.Errorf("build: %w", err)
	}
	store := e.ImageStore().WithProgress(e.Transfers, "build "+refs[0].String())
	e.Progressf("building %d platform(s) from %s", len(platforms), dir)
	idx, err := build.Build(ctx, build.Options{
		ContextDir: contextDir, File: file, Platforms: platforms,
		Base:  build.StoreBase(store, opts.Pull, e.RemoteOptions()...),
		Store: store, Repository: refs[0].Repo,
	})
	if err != nil {
		return ImageResult{}, fmt.Errorf("build: %w", err)
	}
	var d v1.Descriptor
	res := ImageResult{}
	// The build reported its layers as it streamed them into the store.
	for _, r := range refs {
		if d, err = store.WithoutProgress().Write(ctx, r.Repo, idx, r.Tag); err != nil {
			return ImageResult{}, err
		}
		res.References = append(res.References, r.String())
	}
	res.Digest = d.Digest.String()
	res.Platforms, err = indexPlatforms(idx)
	return res, err
}

// Pull imports a complete remote index into the local image store.
func Pull(ctx context.Context, e *openv.Env, opts PullOptions) (ImageResult, error) {
	r, err := oci.RemoteRef(opts.Source)
	if err != nil {
		return ImageResult{}, openv.InvalidArgument(err)
	}
	return pull(ctx, e, r)
}

func pull(ctx context.Context, e *openv.Env, r oci.LocalRef) (ImageResult, error) {
	e.Progressf("pulling %s", r.Remote)
	store := e.ImageStore().WithProgress(e.Transfers, "pull "+r.Remote.String())
	d, err := ociremote.Pull(ctx, store, r.Remote, r.Repo, r.Tag, e.RemoteOptions()...)
	if err != nil {
		return ImageResult{}, err
	}
	idx, err := store.ImageIndex(r.Repo, r.Tag)
	if err != nil {
		return ImageResult{}, err
	}
	ps, err := indexPlatforms(idx)
	return ImageResult{References: []string{r.String()}, Digest: d.Digest.String(), Platforms: ps}, err
}

// Push uploads a local image (pulling it when absent, or always with
// Pull) into the cluster bucket and returns its cluster reference.
func Push(ctx context.Context, e *openv.Env, opts PushOptions) (PushResult, error) {
	dst, err := oci.Destination(opts.Source, opts.Destination)
	if err != nil {
		return PushResult{}, openv.InvalidArgument(err)
	}
	candidates, err := oci.SourceRefs(opts.Source)
	if err != nil {
		return PushResult{}, openv.InvalidArgument(err)
	}
	store := e.ImageStore()
	var src oci.LocalRef
	var top v1.Descriptor
	for _, c := range candidates {
		if opts.Pull && c.Remote != nil {
			break
		}
		if top, err = store.Lookup(c.Repo, c.Tag); err == nil {
			src = c
			break
		} else if !errors.Is(err, oci.ErrNotFound) {
			return PushResult{}, err
		}
	}
	if src.Repo == "" {
		last := candidates[len(candidates)-1]
		if last.Remote == nil {
			return PushResult{}, fmt.Errorf("%s is not in the local image store: run \"podmin build -t %s\" first", last, opts.Source)
		}
		if _, err := pull(ctx, e, last); err != nil {
			return PushResult{}, err
		}
		if top, err = store.Lookup(last.Repo, last.Tag); err != nil {
			return PushResult{}, err
		}
		src = last
	}
	c, bucket, err := e.OpenCluster(ctx)
	if err != nil {
		return PushResult{}, err
	}
	blobs, err := store.Source(src.Repo)
	if err != nil {
		return PushResult{}, err
	}
	res, err := oci.Push(ctx, bucket, blobs, top, dst.Layout, dst.Tag, oci.PushOptions{
		Sink: e.Transfers, Title: "push " + dst.String(),
	})
	if err != nil {
		return PushResult{}, fmt.Errorf("push %s to %s: %w", src, dst, err)
	}
	idx, err := store.ImageIndex(src.Repo, src.Tag)
	if err != nil {
		return PushResult{}, err
	}
	ps, err := indexPlatforms(idx)
	return PushResult{
		ImageResult: ImageResult{References: []string{dst.String()}, Digest: top.Digest.String(), Platforms: ps},
		Bucket:      c.Bucket, Blobs: res.Blobs, Uploaded: res.Uploaded, UploadedBytes: res.UploadedBytes,
	}, err
}

// parsePlatforms reads OS/ARCH[/VARIANT] values; none means the host's
// architecture on Linux, which is what nodes run.
func parsePlatforms(values []string) ([]v1.Platform, error) {
	if len(values) == 0 {
		return []v1.Platform{{OS: "linux", Architecture: runtime.GOARCH}}, nil
	}
	seen := map[string]bool{}
	var out []v1.Platform
	for _, v := range values {
		p, err := v1.ParsePlatform(v)
		if err != nil || p.OS == "" || p.Architecture == "" {
			return nil, fmt.Errorf("platform %s must be OS/ARCH[/VARIANT], e.g. linux/arm64", scrub.Quote(v))
		}
		if seen[p.String()] {
			return nil, fmt.Errorf("platform %s is given twice", scrub.Quote(v))
		}
		seen[p.String()] = true
		out = append(out, *p)
	}
	return out, nil
}

func indexPlatforms(idx v1.ImageIndex) ([]string, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, d := range m.Manifests {
		if d.Platform != nil {
			out = append(out, d.Platform.String())
		}
	}
	return out, nil
}
