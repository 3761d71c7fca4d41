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

// clusterOps are the cluster lifecycle operations the cluster module calls.
type clusterOps interface {
	Setup(ctx context.Context, opts builtins.SetupOptions) (builtins.SetupResult, error)
	Teardown(ctx context.Context, opts builtins.TeardownOptions) (builtins.TeardownResult, error)
	Destroy(ctx context.Context, opts builtins.DestroyOptions) (builtins.DestroyResult, error)
}

// nat64Arg unpacks nat64=: True (the shared t4g.nano default), False, or
// "instance-type=TYPE" exactly as --nat64 takes it.
type nat64Arg string

func (n *nat64Arg) Unpack(v star.Value) error {
	switch v := v.(type) {
	case star.Bool:
		*n = ""
		if v {
			*n = "true"
		}
	case star.String:
		*n = nat64Arg(v)
	default:
		return fmt.Errorf("got %s, want bool or str", v.Type())
	}
	return nil
}

func planValue(p builtins.PlanSummary) star.Value {
	return result("plan", value("add", star.MakeInt(p.Add)), value("change", star.MakeInt(p.Change)),
		value("destroy", star.MakeInt(p.Destroy)), value("steps", stringList(p.Steps)))
}

func secretActions(list []builtins.SecretAction) star.Value {
	vs := make([]star.Value, len(list))
	for i, s := range list {
		vs[i] = result("secret_action", str("name", s.Name), str("action", s.Action))
	}
	return frozenList(vs)
}

func clusterFamily() []*Builtin {
	return []*Builtin{
		{
			Name: "cluster.setup", Command: "setup", Returns: "setup", Mutates: true, Destructive: true,
			Params: []Param{
				{Name: "vpc_cidr", Type: "str", Doc: "private IPv4 primary CIDR of the VPC (not on local contexts)"},
				{Name: "nat64", Type: "bool | str", Default: "False", Doc: "shared NAT64: True (t4g.nano) or \"instance-type=TYPE\""},
				{Name: "nodegroup", Type: "str | list[str]", Default: "[]", Doc: "NAME[,size=N,disk-size=GIB,instance-type=TYPE,zone=ZONE,nat64=TYPE] entries (authoritative)"},
				{Name: "workload_ca_publish", Type: "str", Doc: "also publish the workload CA bundle at s3://BUCKET/KEY"},
				{Name: "otel_logs", Type: "str", Doc: "endpoint=URL[,protocol=http|grpc][,mtls=true][,ca=s3://B/K][,headers-secret=true]"},
				{Name: "agent_source", Type: "str", Doc: "cross-compile the agent from this Podmin checkout"},
			},
			Doc: `Creates or updates the cluster's infrastructure and configuration. Destructive: needs confirm or --yes.

Same as "podmin setup". Every value is validated before anything is written or
run. Returns setup(cluster, nodegroups, plan, applied, secrets, config_changed,
local_agents, planned). Under --dry-run the secrets and the configuration are
recorded, not written, and nothing is applied.`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.SetupOptions
				var nat nat64Arg
				var groups strList
				if err := c.unpack(&o.VPCCIDR, &nat, &groups, &o.WorkloadCAPublish, &o.OtelLogs, &o.AgentSource); err != nil {
					return nil, err
				}
				o.NAT64, o.NodeGroup = string(nat), groups
				res, err := c.host.ops.Setup(c.ctx, o)
				if err != nil {
					return nil, c.fail(err)
				}
				names := make([]string, len(res.Cluster.NodeGroups))
				for i, ng := range res.Cluster.NodeGroups {
					names[i] = ng.Name
				}
				agents := make([]string, len(res.LocalAgents))
				for i, a := range res.LocalAgents {
					agents[i] = a.Command
				}
				return result("setup", str("cluster", res.Cluster.ID), value("nodegroups", stringList(names)),
					value("plan", planValue(res.Plan)), boolean("applied", res.Applied),
					value("secrets", secretActions(res.Secrets)), boolean("config_changed", res.ConfigChanged),
					value("local_agents", stringList(agents)), boolean("planned", c.host.planned())), nil
			},
		},
		{
			Name: "cluster.teardown", Command: "teardown", Returns: "teardown", Mutates: true, Destructive: true,
			Doc: `Destroys the cluster's compute and networking; the bucket, context and CA secrets stay. Destructive: needs confirm or --yes.

Same as "podmin teardown". Returns teardown(cluster, plan, kept, planned).`,
			impl: func(c *call) (star.Value, error) {
				if err := c.unpack(); err != nil {
					return nil, err
				}
				res, err := c.host.ops.Teardown(c.ctx, builtins.TeardownOptions{})
				if err != nil {
					return nil, c.fail(err)
				}
				return result("teardown", str("cluster", res.Cluster), value("plan", planValue(res.Plan)),
					value("kept", stringList(res.Kept)), boolean("planned", c.host.planned())), nil
			},
		},
		{
			Name: "cluster.destroy", Command: "destroy", Returns: "destruction", Mutates: true, Destructive: true,
			Doc: `Destroys the whole cluster: infrastructure, CA secrets, then the bucket and the context. Destructive: needs confirm or --yes.

Same as "podmin destroy". The bucket is deleted only when the context's nonce,
drawn when connect created it, matches its podmin:create-nonce tag; a bucket
connect found existing is kept and only Podmin's objects are deleted from it
(bucket_kept); a bucket of another cluster or without the context's nonce stops
destroy before anything is deleted. Returns destruction(cluster, plan, secrets,
objects_deleted, bucket_deleted, bucket_kept, context_removed, planned).`,
			impl: func(c *call) (star.Value, error) {
				if err := c.unpack(); err != nil {
					return nil, err
				}
				res, err := c.host.ops.Destroy(c.ctx, builtins.DestroyOptions{})
				if err != nil {
					return nil, c.fail(err)
				}
				return result("destruction", str("cluster", res.Cluster), value("plan", planValue(res.Plan)),
					value("secrets", secretActions(res.Secrets)), value("objects_deleted", star.MakeInt(res.ObjectsDeleted)),
					boolean("bucket_deleted", res.BucketDeleted), boolean("bucket_kept", res.BucketKept), boolean("context_removed", res.ContextRemoved),
					boolean("planned", c.host.planned())), nil
			},
		},
	}
}
