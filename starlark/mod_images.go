// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/builtins"
)

// imageOps are the image operations the images module calls.
type imageOps interface {
	Build(ctx context.Context, opts builtins.BuildOptions) (builtins.ImageResult, error)
	Pull(ctx context.Context, opts builtins.PullOptions) (builtins.ImageResult, error)
	Push(ctx context.Context, opts builtins.PushOptions) (builtins.PushResult, error)
}

func imageValue(ctor string, r builtins.ImageResult, planned bool, extra ...field) star.Value {
	fields := append([]field{
		value("references", stringList(r.References)), str("digest", r.Digest),
		value("platforms", stringList(r.Platforms)), boolean("planned", planned),
	}, extra...)
	return result(ctor, fields...)
}

func imagesFamily() []*Builtin {
	return []*Builtin{
		{
			Name: "images.build", Command: "build", Returns: "image", Mutates: true,
			Params: []Param{
				{Name: "path", Type: "str", Positional: true, Default: "\".\"", Doc: "the build context directory"},
				{Name: "tag", Type: "str | list[str]", Default: "[]", Doc: "NAME[:TAG] names of the image (at least one)"},
				{Name: "platform", Type: "list[str]", Default: "[]", Doc: "OS/ARCH[/VARIANT] to build (default linux/<host architecture>)"},
				{Name: "file", Type: "str", Doc: "Containerfile (default PATH/Containerfile, then PATH/Dockerfile)"},
				{Name: "pull", Type: "bool", Default: "False", Doc: "fetch base images from their registry even when stored locally"},
			},
			Doc: `Builds an image from a Containerfile into the local image store.

Same as "podmin build". Returns image(references, digest, platforms, planned).
Under --dry-run the image is built into a scratch copy of the local store.`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.BuildOptions
				var tags, platforms strList
				var pull star.Bool
				if err := c.unpack(&o.Path, &tags, &platforms, &o.File, &pull); err != nil {
					return nil, err
				}
				o.Tag, o.Platform, o.Pull = tags, platforms, bool(pull)
				res, err := c.host.ops.Build(c.ctx, o)
				if err != nil {
					return nil, c.fail(err)
				}
				return imageValue("image", res, c.host.planned()), nil
			},
		},
		{
			Name: "images.pull", Command: "pull", Returns: "image", Mutates: true,
			Params: []Param{
				{Name: "source", Type: "str", Positional: true, Required: true, Doc: "the remote image reference"},
			},
			Doc: `Imports a complete remote image index (every platform) into the local store.

Same as "podmin pull". Returns image(references, digest, platforms, planned).`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.PullOptions
				if err := c.unpack(&o.Source); err != nil {
					return nil, err
				}
				res, err := c.host.ops.Pull(c.ctx, o)
				if err != nil {
					return nil, c.fail(err)
				}
				return imageValue("image", res, c.host.planned()), nil
			},
		},
		{
			Name: "images.push", Command: "push", Returns: "pushed_image", Mutates: true,
			Params: []Param{
				{Name: "source", Type: "str", Positional: true, Required: true, Doc: "the image to push, from the local store (pulled when absent)"},
				{Name: "destination", Type: "str", Doc: "cluster reference; shorthand like hello:v1 means registry.podmin.internal/apps/hello:v1"},
				{Name: "pull", Type: "bool", Default: "False", Doc: "pull SOURCE again even when it is in the local store"},
			},
			Doc: `Uploads an image into the cluster bucket.

Same as "podmin push SOURCE [DESTINATION]". Returns pushed_image(references,
digest, platforms, bucket, blobs, uploaded, planned); references[0] is the
cluster reference to use as an image.`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.PushOptions
				var pull star.Bool
				if err := c.unpack(&o.Source, &o.Destination, &pull); err != nil {
					return nil, err
				}
				o.Pull = bool(pull)
				res, err := c.host.ops.Push(c.ctx, o)
				if err != nil {
					return nil, c.fail(err)
				}
				return imageValue("pushed_image", res.ImageResult, c.host.planned(), str("bucket", res.Bucket),
					value("blobs", star.MakeInt(res.Blobs)), value("uploaded", star.MakeInt(res.Uploaded))), nil
			},
		},
	}
}
