// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"fmt"
	"strings"

	"podmin.dev/podmin/builtins"
)

// Build is recorded: the local image store is not written in a dry run.
func (r *recorder) Build(_ context.Context, o builtins.BuildOptions) (builtins.ImageResult, error) {
	if len(o.Tag) == 0 {
		return builtins.ImageResult{}, fmt.Errorf("build needs at least one tag: pass tag=")
	}
	path := o.Path
	if path == "" {
		path = "."
	}
	r.plan.add(Change{Op: "build", Target: strings.Join(o.Tag, ", "), Where: "local image store",
		Detail: "build the image from context " + r.path(path)})
	return builtins.ImageResult{References: append([]string(nil), o.Tag...), Platforms: o.Platform}, nil
}

// Pull is recorded: nothing is downloaded in a dry run.
func (r *recorder) Pull(_ context.Context, o builtins.PullOptions) (builtins.ImageResult, error) {
	r.plan.add(Change{Op: "pull", Target: o.Source, Where: "local image store", Detail: "import every platform of " + o.Source})
	return builtins.ImageResult{References: []string{o.Source}}, nil
}

// Push is recorded: nothing is uploaded to the bucket in a dry run.
func (r *recorder) Push(_ context.Context, o builtins.PushOptions) (builtins.PushResult, error) {
	dest := o.Destination
	if dest == "" {
		dest = "(derived from " + o.Source + ")"
	}
	r.plan.add(Change{Op: "push", Target: o.Source, Where: "apps/ in the cluster bucket", Detail: "upload blobs, then merge index.json for " + dest})
	return builtins.PushResult{ImageResult: builtins.ImageResult{References: []string{dest}}}, nil
}

// Preview reads the committed state for real; writing files into out= is
// recorded instead.
func (r *recorder) Preview(ctx context.Context, o builtins.PreviewOptions) (builtins.PreviewResult, error) {
	out := o.Out
	o.Out = ""
	res, err := r.real.Preview(ctx, o)
	if err != nil || out == "" {
		return res, err
	}
	r.plan.add(Change{Op: "preview", Target: o.NodeGroup, Where: "directory " + r.path(out),
		Detail: fmt.Sprintf("write %d static Pod file(s)", len(res.Files))})
	return res, nil
}
