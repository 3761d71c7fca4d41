// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/builtins"
)

// previewOps is the preview operation.
type previewOps interface {
	Preview(ctx context.Context, opts builtins.PreviewOptions) (builtins.PreviewResult, error)
}

func previewFamily() []*Builtin {
	return []*Builtin{{
		Name: "deployments.preview", Command: "preview", Returns: "preview",
		Params: []Param{
			{Name: "nodegroup", Type: "str", Required: true, Doc: "NodeGroup whose static Pod files to render"},
			{Name: "out", Type: "str", Doc: "also write the files into this directory"},
		},
		Doc: `Renders the static Pod files a node of a NodeGroup would write.

Same as "podmin preview": the committed state through the agent's own node
transformation, without secret values. Returns preview(nodegroup, dir,
files); each file is preview_file(file, deployment, name, namespace,
revision, yaml). Under --dry-run, out= is recorded, not written.`,
		impl: func(c *call) (star.Value, error) {
			var o builtins.PreviewOptions
			if err := c.unpack(&o.NodeGroup, &o.Out); err != nil {
				return nil, err
			}
			res, err := c.host.ops.Preview(c.ctx, o)
			if err != nil {
				return nil, c.fail(err)
			}
			files := make([]star.Value, len(res.Files))
			for i, f := range res.Files {
				files[i] = result("preview_file", str("file", f.File), str("deployment", f.Deployment), str("name", f.Name),
					str("namespace", f.Namespace), str("revision", f.Revision), str("yaml", f.YAML))
			}
			return result("preview", str("nodegroup", res.NodeGroup), str("dir", res.Dir), value("files", frozenList(files))), nil
		},
	}}
}
