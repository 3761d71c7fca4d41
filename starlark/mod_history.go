// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"fmt"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/builtins"
)

// revisionOps are the revision operations the deployments module calls.
type revisionOps interface {
	History(ctx context.Context, opts builtins.HistoryOptions) (builtins.HistoryResult, error)
	Rollback(ctx context.Context, opts builtins.RollbackOptions) (builtins.RollbackResult, error)
}

func revisionValue(r builtins.RevisionInfo) star.Value {
	return result("revision", integer("revision", r.Revision), boolean("current", r.Current), str("pod", r.Pod),
		str("service_path", r.ServicePath), str("pod_revision", r.PodRevision), value("images", stringList(r.Images)),
		str("time", r.Time), str("write", r.Write))
}

func revisionsFamily() []*Builtin {
	name := Param{Name: "name", Type: "str", Positional: true, Required: true, Doc: "the deployment's name"}
	return []*Builtin{
		{
			Name: "deployments.history", Command: "history", Returns: "list[revision]",
			Params: []Param{name, nodegroupParam},
			Doc: `Lists the revisions a deployment's index entry records, newest first.

Same as "podmin history". Each item is revision(revision, current, pod,
service_path, pod_revision, images, time, write): revision counts from 1;
current marks the payloads the entry holds now; time and write (the ID of the
index write that committed it) are empty for a revision committed before
revisions were recorded. An entry keeps its last 10 revisions. Fails (exit 3
in podmin run) when the deployment does not exist.`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.HistoryOptions
				if err := c.unpack(&o.Name, &o.NodeGroup); err != nil {
					return nil, err
				}
				res, err := c.host.ops.History(c.ctx, o)
				if err != nil {
					return nil, c.fail(err)
				}
				vs := make([]star.Value, len(res.Revisions))
				for i, r := range res.Revisions {
					vs[i] = revisionValue(r)
				}
				return frozenList(vs), nil
			},
		},
		{
			Name: "deployments.rollback", Command: "rollback", Returns: "rollback", Mutates: true,
			Params: []Param{name, nodegroupParam,
				{Name: "to_revision", Type: "int", Default: "0", Doc: "the revision to restore (see history); 0 is the newest one with other payloads than the current"},
				waitParam},
			Doc: `Commits an earlier revision's payloads again.

Same as "podmin rollback": the payloads are read from the bucket, verified
against their digests and committed through the same compare-and-swap as
deploy, as a new revision. Returns rollback(name, nodegroup, namespace, action,
pod, service_path, revision, from_revision, to_revision, planned). wait =
"ready" (or "applied") waits for the nodes as deploy's wait does; under
--dry-run the wait is planned, not performed.`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.RollbackOptions
				if err := c.unpack(&o.Name, &o.NodeGroup, &o.ToRevision, &o.Wait); err != nil {
					return nil, err
				}
				if c.host.planned() && o.Wait != "" {
					if o.Wait != builtins.UntilReady && o.Wait != builtins.UntilApplied {
						return nil, fmt.Errorf("wait = %q: wait for %q or %q", o.Wait, builtins.UntilReady, builtins.UntilApplied)
					}
					o.Wait = "" // recorded writes never reach a node: nothing to wait for
				}
				res, err := c.host.ops.Rollback(c.ctx, o)
				if err != nil {
					return nil, c.fail(err)
				}
				return result("rollback", str("name", res.Name), str("nodegroup", res.NodeGroup), str("namespace", res.Namespace),
					str("action", res.Action), str("pod", res.Pod), str("service_path", res.ServicePath), str("revision", res.Revision),
					integer("from_revision", res.From), integer("to_revision", res.To), boolean("planned", c.host.planned())), nil
			},
		},
	}
}
