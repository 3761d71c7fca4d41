// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"fmt"
	"time"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/state"
)

// statusOps are the observed-state operations: status and wait.
type statusOps interface {
	Status(ctx context.Context, opts builtins.StatusOptions) (builtins.StatusResult, error)
	Wait(ctx context.Context, opts builtins.WaitOptions) (builtins.WaitResult, error)
}

// waitParam is the CLI's --wait: what status and deploy wait for.
var waitParam = Param{Name: "wait", Type: "str", Doc: `"ready" or "applied": wait until every expected node runs the committed revision (and reports it ready); ends with podmin run's --timeout`}

func integer(name string, v int) field { return field{name, star.MakeInt(v)} }

func deploymentStatusFields(d builtins.DeploymentStatus) []field {
	errs := make([]star.Value, len(d.Errors))
	for i, e := range d.Errors {
		errs[i] = result("node_error", str("node", e.Node), str("kind", e.Kind), str("message", e.Message), str("revision", e.Revision))
	}
	nodes := make([]star.Value, len(d.Nodes))
	for i, n := range d.Nodes {
		nodes[i] = result("node_report", str("node", n.Node), str("revision", n.Revision), str("readiness", n.Readiness), str("reason", n.Reason),
			integer("restarts", n.Restarts), str("waiting", n.Waiting), str("retiring", n.Retiring))
	}
	var rollout star.Value = star.None
	if r := d.Rollout; r != nil {
		rollout = result("rollout", str("revision", r.Revision), str("max_unavailable", r.MaxUnavailable), str("max_surge", r.MaxSurge), integer("allowed", r.Allowed),
			value("updating", stringList(r.Updating)), integer("waiting", r.Waiting), value("stuck", stringList(r.Stuck)))
	}
	return []field{str("name", d.Name), str("nodegroup", d.NodeGroup), str("revision", d.Revision), str("state", d.State), str("summary", d.Summary),
		integer("applied", d.Applied), integer("ready", d.Ready), integer("total", d.Total), value("age_seconds", star.Float(d.AgeSeconds)),
		value("errors", frozenList(errs)), value("nodes", frozenList(nodes)), value("rollout", rollout)}
}

func statusValue(res builtins.StatusResult) star.Value {
	groups := make([]star.Value, len(res.NodeGroups))
	for i, g := range res.NodeGroups {
		var expected star.Value = star.None
		if g.Expected != nil {
			expected = star.MakeInt(*g.Expected)
		}
		ds := make([]star.Value, len(g.Deployments))
		for j, d := range g.Deployments {
			ds[j] = result("deployment_status", deploymentStatusFields(d)...)
		}
		groups[i] = result("nodegroup_status", str("nodegroup", g.NodeGroup), value("expected", expected), integer("live", g.Live),
			integer("missing", g.Missing), str("problem", g.Problem), value("deployments", frozenList(ds)))
	}
	leader := result("leader", str("id", res.Leader.ID), value("term", star.MakeUint64(res.Leader.Term)), boolean("live", res.Leader.Live))
	return result("status", str("bucket", res.Bucket), value("leader", leader), value("nodegroups", frozenList(groups)))
}

func statusFamily() []*Builtin {
	return []*Builtin{
		{
			Name: "deployments.status", Command: "status", Returns: "status",
			Params: []Param{
				{Name: "name", Type: "str", Positional: true, Doc: "one deployment (needs nodegroup)"},
				{Name: "nodegroup", Type: "str", Doc: "one NodeGroup; default every NodeGroup of the index"},
				waitParam,
			},
			Doc: `Reports what the nodes run: per deployment, revision applied and ready.

Same as "podmin status". Returns status(bucket, leader, nodegroups), where
leader is leader(id, term, live) and each NodeGroup is nodegroup_status(nodegroup,
expected, live, missing, problem, deployments). Each deployment is
deployment_status(name, nodegroup, revision, state, summary, applied, ready,
total, age_seconds, errors, nodes, rollout): state is "ready", "progressing",
"failed" or "unknown" (no live leader or no current report; problem and summary
say why), errors are node_error(node, kind, message, revision) for the committed
revision, nodes are node_report(node, revision, readiness, reason, restarts,
waiting, retiring: the revision of an older Pod still running beside the
new one during a maxSurge update), and rollout (None without one) is
rollout(revision, max_unavailable, max_surge, allowed, updating, waiting,
stuck). Status never fails because a deployment is not ready; wait = "ready"
or "applied" makes it wait like podmin.deployments.wait for each selected
deployment (until podmin run's --timeout). A name that is not committed fails.`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.StatusOptions
				var wait string
				if err := c.unpack(&o.Name, &o.NodeGroup, &wait); err != nil {
					return nil, err
				}
				res, err := c.host.ops.Status(c.ctx, o)
				if err != nil {
					return nil, c.fail(err)
				}
				if wait != "" && !c.host.planned() {
					for _, g := range res.NodeGroups {
						for _, d := range g.Deployments {
							if _, err := c.host.ops.Wait(c.ctx, builtins.WaitOptions{Name: d.Name, NodeGroup: d.NodeGroup, Until: wait}); err != nil {
								return nil, c.fail(err)
							}
						}
					}
					if res, err = c.host.ops.Status(c.ctx, o); err != nil {
						return nil, c.fail(err)
					}
				}
				return statusValue(res), nil
			},
		},
		{
			Name: "deployments.wait", Returns: "deployment_status", Mutates: true,
			Params: []Param{
				{Name: "name", Type: "str", Positional: true, Required: true, Doc: "the deployment's name"},
				nodegroupParam,
				{Name: "until", Type: "str", Default: `"ready"`, Doc: `"ready": every expected node runs the committed revision and kubelet reports it ready; "applied": every node runs it`},
				{Name: "timeout", Type: "str", Default: `"5m"`, Doc: "how long to wait, a duration such as 90s or 5m"},
			},
			Doc: `Waits until a deployment's committed revision is applied or ready on every expected node.

The gate of "podmin status --wait" and "podmin deploy --wait" (until is their
--wait value, timeout their --timeout). Returns deployment_status(...) with
waited_seconds and until. Fails when the timeout passes first (naming what is
missing: nodes not ready, waiting for a rollout slot, missing), when a node
reports an error for the revision, when the deployment is not committed (exit 3),
and at once when no node can ever report (setup never ran and no agent ever
took part in coordination).
A Pod with a container without a readiness probe, which kubelet calls ready as
soon as it starts, counts as ready once kubelet has reported it ready for 5 s.
Under --dry-run it checks its arguments and plans the wait without waiting.`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.WaitOptions
				until, timeout := builtins.UntilReady, "5m"
				if err := c.unpack(&o.Name, &o.NodeGroup, &until, &timeout); err != nil {
					return nil, err
				}
				// Bad values are bad usage (exit 2), as the same values
				// given to "podmin status --wait" are.
				d, err := time.ParseDuration(timeout)
				if err != nil || d <= 0 {
					return nil, builtins.InvalidArgument(fmt.Errorf("timeout = %q: use a positive duration such as 90s or 5m", timeout))
				}
				o.Until, o.Timeout = until, d
				if until != builtins.UntilReady && until != builtins.UntilApplied {
					return nil, builtins.InvalidArgument(fmt.Errorf("until = %q: wait until %q or %q", until, builtins.UntilReady, builtins.UntilApplied))
				}
				if _, err := state.NewKey(o.NodeGroup, o.Name); err != nil {
					return nil, builtins.InvalidArgument(err)
				}
				if c.host.planned() {
					return result("deployment_status", append(deploymentStatusFields(builtins.DeploymentStatus{Name: o.Name, NodeGroup: o.NodeGroup, State: builtins.StateUnknown,
						Summary: fmt.Sprintf("planned: wait up to %s until %s", d, until)}), str("until", until), value("waited_seconds", star.Float(0)), boolean("planned", true))...), nil
				}
				res, err := c.host.ops.Wait(c.ctx, o)
				if err != nil {
					return nil, c.fail(err)
				}
				return result("deployment_status", append(deploymentStatusFields(res.DeploymentStatus), str("until", res.Until),
					value("waited_seconds", star.Float(res.WaitedSeconds)), boolean("planned", false))...), nil
			},
		},
	}
}
