// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/builtins"
)

// installOps are the managed-component operations the install module calls.
type installOps interface {
	InstallCloudflared(ctx context.Context, opts builtins.InstallCloudflaredOptions) (builtins.InstallResult, error)
	UninstallCloudflared(ctx context.Context, opts builtins.UninstallCloudflaredOptions) (builtins.DeleteResult, error)
}

func installFamily() []*Builtin {
	return []*Builtin{
		{
			Name: "install.cloudflared", Command: "install cloudflared", Returns: "install", Mutates: true,
			Params: []Param{
				{Name: "nodegroup", Type: "str", Required: true, Doc: "NodeGroup to run cloudflared on"},
				{Name: "provider", Type: "str", Doc: "secrets provider holding the tunnel token (default: the context's)"},
			},
			Doc: `Runs a Cloudflare Tunnel connector on every node of a NodeGroup.

Same as "podmin install cloudflared". The token must exist at
/<cluster>/platform-cloudflared/cloudflared/tunnel-token (only its existence is
checked). Returns install(component, name, namespace, nodegroup, image,
mirror_action, action, pod, bucket, planned); mirror_action is mirrored,
reused or repaired (the mirror tagged the digest but a blob was missing or
damaged and was written again), action is created, updated, unchanged or
repaired (the committed Pod payload was missing or damaged and was
rewritten).`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.InstallCloudflaredOptions
				if err := c.unpack(&o.NodeGroup, &o.Provider); err != nil {
					return nil, err
				}
				res, err := c.host.ops.InstallCloudflared(c.ctx, o)
				if err != nil {
					return nil, c.fail(err)
				}
				return result("install", str("component", res.Component), str("name", res.Name), str("namespace", res.Namespace),
					str("nodegroup", res.NodeGroup), str("image", res.Image), str("mirror_action", res.Mirror.Action),
					str("action", res.Action), str("pod", res.Pod), str("bucket", res.Bucket), boolean("planned", c.host.planned())), nil
			},
		},
		{
			Name: "uninstall.cloudflared", Command: "uninstall cloudflared", Returns: "deletion", Mutates: true, Destructive: true,
			Params: []Param{
				{Name: "nodegroup", Type: "str", Required: true, Doc: "NodeGroup to remove cloudflared from"},
			},
			Doc: `Removes the cloudflared install from a NodeGroup. Destructive: needs confirm or --yes.

Same as "podmin uninstall cloudflared". A deployment named cloudflared that
install did not create is refused. Returns deletion(name, nodegroup, action,
planned); action is deleted, or absent when cloudflared was not installed.`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.UninstallCloudflaredOptions
				if err := c.unpack(&o.NodeGroup); err != nil {
					return nil, err
				}
				res, err := c.host.ops.UninstallCloudflared(c.ctx, o)
				if err != nil {
					return nil, c.fail(err)
				}
				return result("deletion", str("name", res.Name), str("nodegroup", res.NodeGroup), str("action", res.Action),
					boolean("planned", c.host.planned())), nil
			},
		},
	}
}
