// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"fmt"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/state"
)

// deploymentOps are the deployment operations the deployments module calls.
type deploymentOps interface {
	Deploy(ctx context.Context, opts builtins.DeployOptions) (builtins.DeployResult, error)
	List(ctx context.Context) ([]builtins.ListEntry, error)
	Delete(ctx context.Context, opts builtins.DeleteOptions) (builtins.DeleteResult, error)
}

func entryValue(e builtins.ListEntry) star.Value {
	return result("deployment_entry", str("name", e.Name), str("namespace", e.Namespace), str("nodegroup", e.NodeGroup),
		str("service", e.Service), str("origin", e.Origin), str("pod", e.Pod), str("error", e.Error))
}

var nodegroupParam = Param{Name: "nodegroup", Type: "str", Required: true, Doc: "NodeGroup of the deployment"}

func deploymentsFamily() []*Builtin {
	return []*Builtin{
		{
			Name: "deployments.deploy", Command: "deploy", Returns: "deployment", Mutates: true,
			Params: append(manifestParams("deploy this manifest instead of the built-in one"), waitParam,
				Param{Name: "strict", Type: "bool", Default: "False", Doc: "fail, before anything is written, when a check warns (NodeGroup not configured, image not in the cluster registry, secret missing, or a check that could not tell)"}),
			Doc: `Commits a deployment to the cluster's desired state.

Same as "podmin deploy". Without file the built-in minimal DaemonSet is used,
shaped by the other arguments. Before it commits it checks, one read each,
that the NodeGroup is configured, that each cluster image is in the registry
and that each secret the Pod mounts exists; each miss (and each privileged
setting or host access of the manifest) is a warning on standard error and in
warnings, also under --dry-run, and strict = True fails the call instead,
before anything is written. Returns deployment(name, nodegroup, namespace,
service, action, pod, service_path, replaced_namespace, repaired, bucket, revision,
warnings, planned); warnings is a list of messages; action
is created, updated, unchanged or repaired (a payload the committed entry names was
missing or corrupt in the bucket and was rewritten). Success means the desired
state was committed, not that a Pod runs, unless wait = "ready" (or "applied")
waits for the nodes as podmin.deployments.wait does (until podmin run's
--timeout); then a failed wait fails the call, the deployment staying committed.
Under --dry-run the wait is planned, not performed.`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.DeployOptions
				var strict star.Bool
				if err := c.unpackManifest(&o.ManifestOptions, &o.File, &o.Wait, &strict); err != nil {
					return nil, err
				}
				o.Strict = bool(strict)
				if c.host.planned() && o.Wait != "" {
					if o.Wait != builtins.UntilReady && o.Wait != builtins.UntilApplied {
						return nil, fmt.Errorf("wait = %q: wait for %q or %q", o.Wait, builtins.UntilReady, builtins.UntilApplied)
					}
					o.Wait = "" // recorded writes never reach a node: nothing to wait for
				}
				res, err := c.host.ops.Deploy(c.ctx, o)
				if err != nil {
					return nil, c.fail(err)
				}
				for _, p := range res.Repaired {
					fmt.Fprintf(c.host.stderr, "repaired %s: its bytes did not match the SHA-512 in its name\n", p)
				}
				if res.ReplacedNamespace != "" {
					fmt.Fprintf(c.host.stderr, "warning: %s/%s replaced the same-named DaemonSet of namespace %s\n", res.NodeGroup, res.Name, res.ReplacedNamespace)
				}
				return result("deployment", str("name", res.Name), str("nodegroup", res.NodeGroup), str("namespace", res.Namespace),
					str("service", res.Service), str("action", res.Action), str("pod", res.Pod), str("service_path", res.ServicePath),
					str("replaced_namespace", res.ReplacedNamespace), value("repaired", stringList(res.Repaired)), str("bucket", res.Bucket),
					str("revision", res.Revision), value("warnings", warningList(res.Warnings)), boolean("planned", c.host.planned())), nil
			},
		},
		{
			Name: "deployments.list", Command: "list", Returns: "list[deployment_entry]",
			Doc: `Lists committed deployments, sorted by NodeGroup, then name.

Same as "podmin list": desired state, not runtime status. Each item is
deployment_entry(name, namespace, nodegroup, service, origin, pod, error).`,
			impl: func(c *call) (star.Value, error) {
				if err := c.unpack(); err != nil {
					return nil, err
				}
				list, err := c.host.ops.List(c.ctx)
				if err != nil {
					return nil, c.fail(err)
				}
				vs := make([]star.Value, len(list))
				for i, e := range list {
					vs[i] = entryValue(e)
				}
				return frozenList(vs), nil
			},
		},
		{
			Name: "deployments.get", Returns: "deployment_entry",
			Params: []Param{
				{Name: "name", Type: "str", Positional: true, Required: true, Doc: "the deployment's name"},
				nodegroupParam,
				{Name: "default", Type: "any", Default: "<unset>", Doc: "returned when there is no such deployment"},
			},
			Doc: `Returns one committed deployment, or default when it does not exist.

Built on list. Without default, absence is an error.`,
			impl: func(c *call) (star.Value, error) {
				var name, ng string
				var def star.Value
				if err := c.unpack(&name, &ng, &def); err != nil {
					return nil, err
				}
				if _, err := state.NewKey(ng, name); err != nil {
					return nil, builtins.InvalidArgument(err)
				}
				list, err := c.host.ops.List(c.ctx)
				if err != nil {
					return nil, c.fail(err)
				}
				for _, e := range list {
					if e.Name == name && e.NodeGroup == ng {
						return entryValue(e), nil
					}
				}
				if def != nil {
					return def, nil
				}
				return nil, c.fail(notFoundf("deployment %s/%s does not exist: pass default= to handle absence", ng, name))
			},
		},
		{
			Name: "deployments.delete", Command: "delete", Returns: "deletion", Mutates: true, Destructive: true,
			Params: []Param{
				{Name: "name", Type: "str", Positional: true, Required: true, Doc: "the deployment's name"},
				nodegroupParam,
				{Name: "ignore_not_found", Type: "bool", Default: "False", Doc: "succeed when the deployment does not exist"},
			},
			Doc: `Removes a deployment from the cluster's desired state. Destructive: needs confirm or --yes.

Same as "podmin delete". Returns deletion(name, nodegroup, action, planned);
action is deleted, or absent with ignore_not_found=True.`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.DeleteOptions
				var ignore star.Bool
				if err := c.unpack(&o.Name, &o.NodeGroup, &ignore); err != nil {
					return nil, err
				}
				res, err := c.host.ops.Delete(c.ctx, o)
				if err != nil {
					return nil, c.fail(err)
				}
				if res.Action == "absent" && !ignore {
					return nil, c.fail(notFoundf("deployment %s/%s does not exist: nothing was changed; pass ignore_not_found=True to accept that", res.NodeGroup, res.Name))
				}
				return result("deletion", str("name", res.Name), str("nodegroup", res.NodeGroup), str("action", res.Action),
					boolean("planned", c.host.planned())), nil
			},
		},
	}
}

// warningList is the messages of an operation's warnings, in order.
func warningList(ws []builtins.Warning) star.Value {
	msgs := make([]string, len(ws))
	for i, w := range ws {
		msgs[i] = w.Message
	}
	return stringList(msgs)
}
