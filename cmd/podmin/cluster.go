// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
)

// clusterCommands are setup, teardown and destroy.
func clusterCommands(env *builtins.Env) []*cobra.Command {
	return []*cobra.Command{newSetupCmd(env), newTeardownCmd(env), newDestroyCmd(env)}
}

// showPlan writes a plan to stderr before the confirmation.
func showPlan(w io.Writer, p builtins.PlanSummary) {
	if p.Text != "" {
		fmt.Fprintln(w, strings.TrimRight(p.Text, "\n"))
	}
	if p.Add+p.Change+p.Destroy > 0 {
		fmt.Fprintf(w, "Plan: %d to add, %d to change, %d to destroy.\n", p.Add, p.Change, p.Destroy)
	}
	for _, s := range p.Steps {
		fmt.Fprintln(w, "  -", s)
	}
}

// planConfirm shows the plan and then asks the one confirmation.
func planConfirm(cmd *cobra.Command, env *builtins.Env, yes bool, what string) func(builtins.PlanSummary) error {
	return func(p builtins.PlanSummary) error {
		showPlan(cmd.ErrOrStderr(), p)
		c, err := env.CurrentContext()
		if err != nil {
			return err
		}
		return confirm(cmd, env, yes, fmt.Sprintf(what, c.Cluster), c.Cluster)
	}
}

func newSetupCmd(env *builtins.Env) *cobra.Command {
	var (
		opts builtins.SetupOptions
		yes  bool
		out  string
	)
	cmd := &cobra.Command{
		Use:   "setup --vpc-cidr CIDR --nodegroup NAME[,KEY=VALUE...]... [--nat64[=instance-type=TYPE]] [-y]",
		Short: "Create or update the cluster's infrastructure and configuration",
		Long: `Setup makes the cluster match the given NodeGroups. The --nodegroup list is
authoritative: a NodeGroup left out is removed. Every value is validated before
anything is written or run.

  --nodegroup NAME[,size=N,disk-size=GIB,instance-type=TYPE,zone=ZONE,nat64=TYPE]
      size (default 1), disk-size in GiB from 8 through 16384 (default 20),
      instance-type (default t4g.small; a Nitro type with IPv6 and at least two
      network interfaces), zone (a full name or one suffix letter: zone=b in
      us-west-2 is us-west-2b; default the first available zone), nat64=TYPE
      (a dedicated NAT64 instance for this NodeGroup).
  --nat64[=instance-type=TYPE]
      a shared NAT64 instance (default t4g.nano) in each zone with a NodeGroup.

On AWS, setup renders the embedded OpenTofu/Terraform module under the Podmin
cache, plans, shows the plan, asks for confirmation (or takes --yes/-y), stores
the cluster's CA secrets (create-only, never in any OpenTofu/Terraform file,
plan or state) and applies. On a local context there is no VPC, NAT64 or VM:
setup stores the CA secrets in the local secrets store, publishes the cluster
configuration the agents read, and prints how to start a local node agent for
every node of every NodeGroup; only size= applies there.`,
		Example: `  podmin setup --vpc-cidr 10.0.0.0/16 --nat64 \
    --nodegroup default \
    --nodegroup workers,size=3,disk-size=100,instance-type=c8g.large,zone=b,nat64=t4g.small
  podmin setup --vpc-cidr 10.0.0.0/16 --nodegroup default,instance-type=c8g.large -y -o json
  podmin setup --nodegroup default,size=2
  podmin setup --nodegroup default --nodegroup workers,size=3 -y -o json`,
		// Args runs before any context is read: values every provider
		// rejects are usage errors (exit 2).
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				return err
			}
			return builtins.CheckSetupSyntax(opts)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			opts.Confirm = planConfirm(cmd, env, yes, "setup applies this plan to cluster %s")
			res, err := env.Setup(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error {
				for _, s := range res.Secrets {
					fmt.Fprintf(w, "secret %s: %s\n", s.Name, s.Action)
				}
				state := "unchanged"
				if res.ConfigChanged {
					state = "published"
				}
				fmt.Fprintf(w, "cluster configuration %s: %s\n", res.ConfigPublished, state)
				if len(res.LocalAgents) > 0 {
					fmt.Fprintln(w, "start one local node agent per node (each with its own /80 --ipv6-prefix routed to it):")
					for _, a := range res.LocalAgents {
						fmt.Fprintf(w, "  %s\n", a.Command)
					}
				}
				_, err := fmt.Fprintf(w, "cluster %s is set up with %d NodeGroup(s)\n", res.Cluster.ID, len(res.Cluster.NodeGroups))
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.VPCCIDR, "vpc-cidr", "", "private IPv4 primary CIDR of the VPC, e.g. 10.0.0.0/16 (not on local contexts)")
	f.StringVar(&opts.NAT64, "nat64", "", "shared EC2 NAT64: --nat64 (t4g.nano) or --nat64=instance-type=TYPE")
	f.Lookup("nat64").NoOptDefVal = "true"
	f.StringArrayVar(&opts.NodeGroup, "nodegroup", nil, "NAME[,size=N,disk-size=GIB,instance-type=TYPE,zone=ZONE,nat64=TYPE] (repeatable; authoritative)")
	f.StringVar(&opts.WorkloadCAPublish, "workload-ca-publish", "", "also publish the workload CA bundle at s3://BUCKET/KEY")
	f.StringVar(&opts.OtelLogs, "otel-logs", "", "export container logs: endpoint=URL[,protocol=http|grpc][,mtls=true][,ca=s3://B/K][,headers-secret=true]")
	f.StringVar(&opts.AgentSource, "agent-source", "", "cross-compile the agent from this Podmin checkout instead of the published one")
	destructive(cmd, &yes)
	addOutputFlag(cmd, &out)
	requireFlags(cmd, "nodegroup")
	return cmd
}

func newTeardownCmd(env *builtins.Env) *cobra.Command {
	var (
		yes bool
		out string
	)
	cmd := &cobra.Command{
		Use:   "teardown [-y]",
		Short: "Destroy the cluster's compute and networking; keep the bucket, context and CA secrets",
		Long: `Teardown destroys the compute and networking setup created. The bucket and
everything in it, the context, both CA secrets and the public workload CA state
remain, so a later setup restores the cluster without changing trust.

Only what carries proof of this cluster is destroyed: OpenTofu/Terraform state
this cluster created together with the podmin:cluster tag. A reused VPC is never
deleted. On a local context teardown withdraws the published cluster
configuration; stop the local node agents yourself.`,
		Example: `  podmin teardown
  podmin teardown -y -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			res, err := env.Teardown(cmd.Context(), builtins.TeardownOptions{
				Confirm: planConfirm(cmd, env, yes, "teardown destroys the compute and networking of cluster %s")})
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "cluster %s is torn down; kept: %s\n", res.Cluster, strings.Join(res.Kept, ", "))
				return err
			})
		},
	}
	destructive(cmd, &yes)
	addOutputFlag(cmd, &out)
	return cmd
}

func newDestroyCmd(env *builtins.Env) *cobra.Command {
	var (
		yes bool
		out string
	)
	cmd := &cobra.Command{
		Use:   "destroy [-y]",
		Short: "Destroy the whole cluster: infrastructure, CA secrets, bucket, then the context",
		Long: `Destroy runs teardown, permanently deletes the CA secrets this context
created, empties and deletes the bucket, and removes the context only after all
of that succeeded.

A CA secret is deleted only when it carries the podmin:create-nonce this
context recorded when setup created it (a Parameter Store tag, or the local
store's record). One without it (it existed before setup, or another context or
tool created it) is kept, listed in the plan and the result with how to delete
it yourself. A nonce that cannot be read stops destroy before anything is deleted.

Every other secret of the cluster is kept too, and each is listed in the plan
and the result with the command that deletes it: the secrets of its Pods
(/CLUSTER/NAMESPACE/POD/KEY) and the allowlisted system keys, in each secrets
provider the cluster may use (on AWS both Parameter Store and Secrets Manager).
Nothing proves who created them, and on AWS a later cluster of the same name
would mount them. A provider that cannot be listed is reported as unknown, not
as empty.

The bucket is deleted only when this context holds the nonce connect drew when
it created the bucket and the bucket's podmin:create-nonce tag still carries it;
tags alone prove nothing. A bucket connect found existing is never deleted: only
Podmin's objects are removed from it (its bucket layout: tfstate/, dependencies/,
apps/, mirror/, deployments/, nodegroups/, services/, dns/, identity/, status/
and connect's probes, listed in the plan with their counts) and every other object
stays. A bucket tagged for another cluster, or one that no longer carries this
context's nonce, stops destroy before anything is deleted. Every step can be
repeated, so an interrupted destroy is finished by running it again.`,
		Example: `  podmin destroy
  podmin destroy -y -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			res, err := env.Destroy(cmd.Context(), builtins.DestroyOptions{
				Confirm: planConfirm(cmd, env, yes, "destroying cluster %s deletes its infrastructure, CA secrets and bucket permanently")})
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error {
				for _, s := range res.Secrets {
					switch s.Action {
					case "kept":
						fmt.Fprintf(w, "secret %s: kept: %s\n", s.Name, s.Reason)
					case "unknown":
						fmt.Fprintf(w, "secrets %s: unknown: %s\n", s.Name, s.Reason)
					}
				}
				if res.BucketKept {
					_, err := fmt.Fprintf(w, "cluster %s is destroyed (%d Podmin objects deleted; its bucket, which Podmin did not create, is kept with every other object); its context is removed\n", res.Cluster, res.ObjectsDeleted)
					return err
				}
				_, err := fmt.Fprintf(w, "cluster %s is destroyed (%d objects deleted); its context is removed\n", res.Cluster, res.ObjectsDeleted)
				return err
			})
		},
	}
	destructive(cmd, &yes)
	addOutputFlag(cmd, &out)
	return cmd
}
