// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/state"
)

func newIndexCmd(env *builtins.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "index",
		Short: "Repair the cluster's deployments index",
		Long: `Commands on deployments/index.json, the cluster's single commit point of
desired state. Every other command refuses to act on an index that does not
decode (and leaves its bytes alone), or that is missing from a bucket that still
holds the desired state it committed; "podmin index rebuild" is the way back.`,
		Example: `  podmin index rebuild
  podmin index rebuild --pick workers/web=3f2a9c1e --pick edge/old=none -y`,
	}
	cmd.AddCommand(newIndexRebuildCmd(env))
	return cmd
}

func newIndexRebuildCmd(env *builtins.Env) *cobra.Command {
	var opts builtins.IndexRebuildOptions
	var yes, dryRun bool
	var out string
	cmd := &cobra.Command{
		Use:   "rebuild [--pick CHOICE]... [-y]",
		Short: "Rebuild a corrupt or lost deployments/index.json from its readable entries and the payloads",
		Long: `Rebuild reconstructs deployments/index.json when it no longer decodes or is
missing. Use it when deploy, delete, list or status refuse the index ("does not
decode", "the deployments index is missing"), or a node's /readyz asks to restore
it. Run it before any deploy: nodes keep every Pod while the index is missing,
and deploy refuses to answer a lost index with a new one (which would hold only
the new deployment). It works from:

  - the entries of the corrupt index that can still be read one by one, kept
    when their Pod and Service payloads are present and intact;
  - for every other name, the Pod payloads in the bucket
    (nodegroups/<ng>/pods/sha512/*.yaml, each read and verified against its
    digest; its metadata.name is the deployment's name), judged by the
    newest evidence: the NodeGroup views (deployments/nodegroups/<ng>.json).

Payloads are never deleted, so the bucket also holds earlier versions and the
payloads of deleted deployments; a payload alone never proves a deployment
live. A view written after every Pod payload of a name restores the version it
lists (with its Service), or, when it does not list the name, shows it deleted:
it is left out. When the damaged index kept its metadata, a view whose bytes
have the digest it records is current whatever the times, and one with another
digest is no evidence; nor is a view without its source write ID. What the
evidence cannot decide is never added: a payload written at or after the view
that lacks it, a NodeGroup without a usable view, several payloads no view
chooses between, several payloads of a Service, or two deployments claiming
one Service. Rebuild then writes nothing and lists the choices with the --pick
that settles each: --pick NODEGROUP/NAME=DIGEST (that Pod payload; a unique
prefix of at least 8 characters is enough), --pick NODEGROUP/NAME=none (leave
the deployment out, e.g. one that had been deleted) or
--pick service:NAMESPACE/SERVICE=DIGEST.

The plan is shown as a diff before anything is written: " " a readable entry
kept, "+" an entry restored as its view lists it (or as picked), "-" one left
out (with why).
Rebuild is destructive: on a terminal it asks you to type the cluster ID;
--yes/-y confirms without asking and is needed when standard input is not a
terminal (without it the plan is shown and nothing is written, exit status 4).
The write is conditional on the corrupt object's ETag, so an index that changed
since the plan is not overwritten. A valid index is refused (rebuilding it from
the payloads would bring back deleted deployments). A bucket that holds NodeGroup
views (or Pod payloads that do not verify) but no usable Pod payload is rebuilt
to an empty index, every name it held shown as left out.

With --dry-run the plan is made from the real bucket exactly as above and shown
as a diff on standard error, and the write is recorded over the boundaries of
"podmin run --dry-run" instead of made: the plan of changes is printed (-o json:
the plan document), with no confirmation asked.`,
		Example: `  podmin index rebuild
  podmin index rebuild --pick workers/web=3f2a9c1e --pick service:default/web=77ab01c2 -y
  podmin index rebuild --pick edge/old=none -y -o json
  podmin index rebuild --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			c, err := env.CurrentContext()
			if err != nil {
				return err
			}
			if dryRun {
				o := opts
				o.Confirm = func(plan builtins.IndexRebuildResult) error {
					_, err := fmt.Fprint(cmd.ErrOrStderr(), plan.Diff())
					return err
				}
				return printDryRun(cmd, env, "index rebuild", "", out, func(ctx context.Context, ops *builtins.Env) error {
					_, err := ops.RebuildIndex(ctx, o)
					return err
				})
			}
			opts.Confirm = func(plan builtins.IndexRebuildResult) error {
				fmt.Fprint(cmd.ErrOrStderr(), plan.Diff())
				what := fmt.Sprintf("rebuilding replaces deployments/index.json of cluster %s with these %d entries; nodes then run exactly these deployments", c.Cluster, len(plan.Entries))
				return confirm(cmd, env, yes, what, c.Cluster)
			}
			res, err := env.RebuildIndex(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "deployments/index.json rebuilt with %d entries in bucket %s; run \"podmin list\" to check them\n", len(res.Entries), res.Bucket)
				return err
			})
		},
	}
	// A malformed --pick is bad usage, told before the bucket is read.
	checkUsage(cmd, func([]string) error {
		for _, p := range opts.Pick {
			if _, err := state.ParsePick(p); err != nil {
				return fmt.Errorf("--pick: %w", err)
			}
		}
		return nil
	})
	cmd.Flags().StringArrayVar(&opts.Pick, "pick", nil, "settle a choice: NODEGROUP/NAME=DIGEST, NODEGROUP/NAME=none or service:NAMESPACE/SERVICE=DIGEST (repeatable)")
	destructive(cmd, &yes)
	addOutputFlag(cmd, &out)
	addDryRunFlag(cmd, &dryRun)
	return cmd
}
