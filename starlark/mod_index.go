// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/builtins"
)

// indexOps are the operations on the deployments index itself.
type indexOps interface {
	RebuildIndex(ctx context.Context, opts builtins.IndexRebuildOptions) (builtins.IndexRebuildResult, error)
}

func indexFamily() []*Builtin {
	return []*Builtin{{
		Name: "index.rebuild", Command: "index rebuild", Returns: "index_rebuild", Mutates: true, Destructive: true,
		Params: []Param{
			{Name: "pick", Type: "list[str]", Default: "[]", Doc: "settle a choice: NODEGROUP/NAME=DIGEST, NODEGROUP/NAME=none or service:NAMESPACE/SERVICE=DIGEST"},
		},
		Doc: `Rebuilds a corrupt deployments/index.json from its readable entries and the payloads. Destructive: needs confirm or --yes.

Same as "podmin index rebuild": readable entries of the corrupt index are kept
when their payloads are intact; every other name comes from the Pod payloads in
the bucket as the newest evidence decides: a NodeGroup view written after every
payload of a name restores the version it lists, or leaves out the name it does
not list (deleted). The index is written conditionally on the corrupt object's
ETag. What the evidence cannot decide (a payload newer than its view, no usable
view, several payloads for one name or one Service, a Service claimed twice)
fails with the picks that settle it; a valid index is refused. The plan is printed as a diff on standard error.
Returns index_rebuild(bucket, problem, entries, dropped, skipped, written,
planned); each entry is index_entry(deployment, source, pod, service, images),
each dropped one index_dropped(deployment, reason). Under --dry-run the plan is
made from the real bucket and the write is recorded, not made.`,
		impl: func(c *call) (star.Value, error) {
			var picks strList
			if err := c.unpack(&picks); err != nil {
				return nil, err
			}
			o := builtins.IndexRebuildOptions{Pick: picks, Confirm: func(plan builtins.IndexRebuildResult) error {
				_, err := c.host.stderr.Write([]byte(plan.Diff()))
				return err
			}}
			res, err := c.host.ops.RebuildIndex(c.ctx, o)
			if err != nil {
				return nil, c.fail(err)
			}
			entries := make([]star.Value, len(res.Entries))
			for i, e := range res.Entries {
				entries[i] = result("index_entry", str("deployment", e.Deployment), str("source", e.Source), str("pod", e.Pod),
					str("service", e.Service), value("images", stringList(e.Images)))
			}
			dropped := make([]star.Value, len(res.Dropped))
			for i, d := range res.Dropped {
				dropped[i] = result("index_dropped", str("deployment", d.Deployment), str("reason", d.Reason))
			}
			return result("index_rebuild", str("bucket", res.Bucket), str("problem", res.Problem), value("entries", frozenList(entries)),
				value("dropped", frozenList(dropped)), value("skipped", stringList(res.Skipped)), boolean("written", res.Written),
				boolean("planned", c.host.planned())), nil
		},
	}}
}
