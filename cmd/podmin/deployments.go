// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/state"
)

func newDeployCmd(env *builtins.Env) *cobra.Command {
	var opts builtins.DeployOptions
	var out string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "deploy NAME -g NODEGROUP (--image IMAGE... | -f FILE)",
		Short: "Commit a deployment to the cluster's desired state",
		Long: `Deploy validates a DaemonSet exactly as "podmin validate" does, stores its Pod
(and Service) as content-addressed payloads, and commits its entry to the cluster's
deployments/index.json with a compare-and-swap write.

Without --file it deploys the built-in minimal DaemonSet shaped by --image,
--namespace, --service, --port, --cpu, --memory, --env and --secret (as "podmin
init" would write it). With --file only --image overrides and --service (which
asserts that the manifest has a Service) apply.

Success means the desired state was committed to the bucket. Nodes discover and
reconcile it asynchronously: deploy does not claim that a Pod is running or ready.
It reports created, updated or unchanged; an identical re-deploy writes nothing,
unless a payload the index names is missing or corrupt in the bucket: then it
rewrites it and reports repaired.

With --wait (or --wait=ready) deploy then waits until every expected node of the
NodeGroup runs the committed revision and kubelet reports it ready; --wait=applied
waits until every node runs it. Kubelet calls a container without a readiness
probe ready as soon as it starts, so a Pod with such a container counts as ready
only once kubelet has reported it ready for 5 s. Nodes replace a running Pod one
rollout slot at a time, as the DaemonSet's updateStrategy (maxUnavailable,
default 1) allows, so the wait covers the whole rolling update. It shows progress
on standard error, exits 124 when --timeout passes first (naming what is missing:
nodes not ready, waiting for a slot, missing), and 1 when a node reports an error
for the revision (the deployment stays committed), another commit replaces it,
or no node can ever report (setup never ran and no agent ever took part in
coordination: it fails at once).
An error a node reported before the wait began (a deploy that changed nothing,
after a fix outside the manifest such as a secret created or an image pushed again
under its tag) ends the wait only once the node reports it again, or when it
still stands 1 minute later.

A write whose reply was lost is resolved by reading the index back; when that
cannot prove whether it landed (other writers changed the index meanwhile), deploy
exits 6 and writes nothing more: run "podmin list" to check, then repeat it if
needed.

Only a new cluster has no deployments/index.json. When it is missing from a
bucket that still holds the NodeGroup views its commits wrote, it was lost, and a new
index holding only this deployment would make every node stop the Pods of all
the others: deploy then writes nothing and exits 4. Run "podmin index rebuild",
which restores the index from the payloads (showing its plan first), then deploy
again.

Before it commits, deploy checks with one read each what would keep the
deployment from ever running: that the NodeGroup is in the cluster configuration
setup published, that each registry.podmin.internal image is in its repository's
index in the bucket, and that each secret the Pod's podmin.dev/<provider>
annotations name exists in that provider. Each miss is a warning on standard
error naming the fix ("podmin setup", "podmin push", "podmin secret create"),
and is in the warnings list of -o json; the deployment is committed anyway. A
check whose read fails warns that it could not tell. With --strict any of them
refuses the deploy before anything is written (exit status 4). The manifest's
privileged settings and host access (hostNetwork, hostPID, hostIPC, privileged,
added capabilities, hostPath, hostPort) are warned about too, as validate does;
--strict does not refuse those.

Deployment identity is NODEGROUP/NAME: deploying a same-named DaemonSet from
another namespace replaces the entry, and deploy warns when it does.

With --dry-run deploy runs exactly as it would, over the recording boundaries of
"podmin run --dry-run": it reads the bucket, runs the checks and warns, but
every write lands in an overlay, and it prints the plan: each object it would
create or update (the Pod and Service payloads, deployments/index.json, the
NodeGroup view) with a diff (a new Pod payload is diffed against the one it
replaces). -o json prints the plan document. --wait is then planned, not
performed.`,
		Example: `  podmin deploy web -g workers --image hello:v1 --service
  podmin deploy web -g workers --image hello:v2 --dry-run
  podmin deploy web -g workers -f daemonset.yaml --image web=hello:v2
  podmin deploy web -g workers --image hello:v2 --wait --timeout 5m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			opts.Name = args[0]
			if dryRun {
				o := opts
				o.Wait = "" // recorded writes never reach a node: nothing to wait for
				return printDryRun(cmd, env, "deploy", o.Name, out, func(ctx context.Context, ops *builtins.Env) error {
					_, err := ops.Deploy(ctx, o)
					return err
				})
			}
			res, err := env.Deploy(cmd.Context(), opts)
			if err != nil && res.Wait == nil {
				return err
			}
			if err != nil {
				// Committed, but the wait failed: the result still goes
				// to standard output.
				_ = printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error { return nil })
				return err
			}
			for _, p := range res.Repaired {
				fmt.Fprintf(cmd.ErrOrStderr(), "repaired %s: it was missing from the bucket, or its bytes did not match the SHA-512 in its name, so the deployed bytes were written (conditionally on the object's ETag, or create-only)\n", p)
			}
			if res.ReplacedNamespace != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: this replaced DaemonSet %s of namespace %s in NodeGroup %s: deployment identity is NODEGROUP/NAME, so same-named DaemonSets of different namespaces cannot coexist in one NodeGroup\n",
					res.Name, res.ReplacedNamespace, res.NodeGroup)
			}
			return printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error {
				target := res.NodeGroup + "/" + res.Name
				switch res.Action {
				case "unchanged":
					fmt.Fprintf(w, "%s unchanged: the committed desired state already matches; nothing was written\n", target)
				case "repaired":
					fmt.Fprintf(w, "%s repaired: the committed desired state already matches; its missing or corrupt payloads were rewritten in bucket %s\n", target, res.Bucket)
				default:
					fmt.Fprintf(w, "%s %s: desired state committed to deployments/index.json in bucket %s\n", target, res.Action, res.Bucket)
				}
				if res.Wait != nil {
					_, err := fmt.Fprint(w, waitNote(res.Wait))
					return err
				}
				_, err := fmt.Fprintf(w, "nodes in NodeGroup %s reconcile it asynchronously; this does not mean the Pod is running (--wait waits for it)\n", res.NodeGroup)
				return err
			})
		},
	}
	f := cmd.Flags()
	addManifestFlags(f, &opts.ManifestOptions)
	f.StringVar(&opts.Namespace, "namespace", "", "namespace of the built-in DaemonSet and its Service (default \"default\")")
	f.StringVarP(&opts.File, "file", "f", "", "deploy this manifest instead of the built-in one (- reads standard input)")
	f.BoolVar(&opts.Strict, "strict", false, "refuse, before anything is written, a deployment the checks warn about (NodeGroup not configured, image not in the cluster registry, secret missing, or a check that could not tell)")
	addWaitFlag(cmd, &opts.Wait, "after the commit, wait")
	addOutputFlag(cmd, &out)
	addDryRunFlag(cmd, &dryRun)
	requireFlags(cmd, "nodegroup")
	checkUsage(cmd, func(args []string) error {
		o := opts
		o.Name = args[0]
		return env.CheckDeploy(o)
	})
	return cmd
}

func newListCmd(env *builtins.Env) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List committed deployments (desired state, not runtime status)",
		Long: `List reads the cluster's deployments/index.json and the Pod payloads it
references, and shows each deployment's name, namespace, NodeGroup, optional
Service and, for Pods made by a built-in install command, its origin.

It checks that every payload the index names is in the bucket, with one
paginated LIST of each NodeGroup's Pod payloads (and of the Service payloads),
without reading bodies: a payload whose ETag and size are those the object cache
recorded when it verified the bytes is served from the cache; any other is read
and verified. A missing or corrupt payload is reported on its row (and in the
"error" field of -o json), and list exits 1; an identical "podmin deploy"
rewrites it.

This is an inventory of committed desired state. It is not runtime status or
health: a listed deployment may not be running yet, or at all.

"no deployments committed" means a new cluster: no index, and no Pod payload or
NodeGroup view in the bucket. When the index is missing from a bucket that holds
them, what is committed is unknown: list says so, prints
{bucket, indexMissing: true, problem, deployments: []} with -o json, and exits 1;
run "podmin index rebuild".`,
		Example: `  podmin list
  podmin list -o json
  podmin list -o name
  podmin list -o jsonpath='{[?@.nodegroup=="workers"].name}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			list, err := env.List(cmd.Context())
			if errors.Is(err, state.ErrIndexMissing) {
				return printIndexMissing(cmd, env, out, err)
			}
			if err != nil {
				return err
			}
			if err := printResult(cmd.OutOrStdout(), out, list, func(w io.Writer) error {
				if len(list) == 0 {
					_, err := fmt.Fprintln(w, "no deployments committed")
					return err
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NODEGROUP\tNAME\tNAMESPACE\tSERVICE\tORIGIN")
				for _, e := range list {
					ns := e.Namespace
					if e.Error != "" {
						ns = "?"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.NodeGroup, e.Name, ns, dash(e.Service), dash(e.Origin))
				}
				return tw.Flush()
			}); err != nil {
				return err
			}
			bad := 0
			for _, e := range list {
				if e.Error != "" {
					bad++
					fmt.Fprintf(cmd.ErrOrStderr(), "%s/%s: %s\n", e.NodeGroup, e.Name, e.Error)
				}
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d deployments have payloads that are missing or could not be read or verified: nodes keep their last good state for them; deploy them again (an identical deploy rewrites a missing or corrupt payload)", bad, len(list))
			}
			return nil
		},
	}
	addOutputFlag(cmd, &out)
	return cmd
}

// indexMissing is the document list prints instead of its rows when the
// index is missing from a bucket that holds desired state.
type indexMissing struct {
	Bucket       string               `json:"bucket"`
	IndexMissing bool                 `json:"indexMissing"`
	Problem      string               `json:"problem"`
	Deployments  []builtins.ListEntry `json:"deployments"`
}

// printIndexMissing says that what is committed is unknown, and returns
// err (exit 1): a lost index is never "no deployments committed".
func printIndexMissing(cmd *cobra.Command, env *builtins.Env, out string, err error) error {
	doc := indexMissing{IndexMissing: true, Problem: err.Error(), Deployments: []builtins.ListEntry{}}
	if c, cerr := env.CurrentContext(); cerr == nil {
		doc.Bucket = c.Bucket
	}
	if perr := printResult(cmd.OutOrStdout(), out, doc, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "deployments/index.json is missing: what is committed is unknown; %s\n", state.RebuildAdvice)
		return err
	}); perr != nil {
		return perr
	}
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newDeleteCmd(env *builtins.Env) *cobra.Command {
	var opts builtins.DeleteOptions
	var ignoreNotFound, yes, dryRun bool
	var out string
	cmd := &cobra.Command{
		Use:   "delete NAME -g NODEGROUP [-y]",
		Short: "Remove a deployment from the cluster's desired state",
		Long: `Delete removes NODEGROUP/NAME from deployments/index.json with a
compare-and-swap write. Its immutable payloads stay in the bucket, unreferenced.
Nodes remove the Pod when they next reconcile.

Deleting a deployment that does not exist writes nothing and fails with exit
status 3, unless --ignore-not-found is given. A write whose reply was lost is
resolved by reading the index back: an entry that is gone by then is deleted
(exit 0, with a note that the reply was lost), one still there exits 6. When deployments/index.json is
missing from a bucket that holds the NodeGroup views its commits wrote, whether the
deployment exists is unknown: delete writes nothing and exits 4, with
--ignore-not-found too; run "podmin index rebuild" first.

Delete is destructive: on a terminal it asks you to type the cluster ID;
--yes/-y confirms without asking and is needed when standard input is not a
terminal (exit status 4 otherwise).

With --dry-run delete runs over the recording boundaries of "podmin run
--dry-run" and prints the plan (the index entry it would remove, as a diff)
instead of writing; it needs no confirmation. -o json prints the plan document.
An absent deployment still exits 3 without --ignore-not-found.`,
		Example: `  podmin delete web -g workers
  podmin delete web -g workers --dry-run
  podmin delete web -g workers --ignore-not-found -y`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			opts.Name = args[0]
			c, err := env.CurrentContext()
			if err != nil {
				return err
			}
			absent := func(res builtins.DeleteResult) error {
				if res.Action == "absent" && !ignoreNotFound {
					return notFoundError{fmt.Errorf("deployment %s/%s does not exist: nothing was changed; run \"podmin list\" to see deployments", res.NodeGroup, res.Name)}
				}
				return nil
			}
			if dryRun {
				return printDryRun(cmd, env, "delete", opts.Name, out, func(ctx context.Context, ops *builtins.Env) error {
					res, err := ops.Delete(ctx, opts)
					if err != nil {
						return err
					}
					return absent(res)
				})
			}
			if err := confirm(cmd, env, yes, fmt.Sprintf("deleting deployment %s/%s removes its Pods from every node", opts.NodeGroup, opts.Name), c.Cluster); err != nil {
				return err
			}
			res, err := env.Delete(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if err := absent(res); err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error {
				if res.Action == "absent" {
					_, err := fmt.Fprintf(w, "deployment %s/%s does not exist: nothing was changed\n", res.NodeGroup, res.Name)
					return err
				}
				_, err := fmt.Fprintf(w, "%s/%s deleted from the desired state; nodes remove its Pod when they next reconcile\n", res.NodeGroup, res.Name)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.NodeGroup, "nodegroup", "g", "", "NodeGroup of the deployment (required)")
	f.BoolVar(&ignoreNotFound, "ignore-not-found", false, "succeed when the deployment does not exist")
	destructive(cmd, &yes)
	addOutputFlag(cmd, &out)
	addDryRunFlag(cmd, &dryRun)
	requireFlags(cmd, "nodegroup")
	checkUsage(cmd, func(args []string) error {
		_, err := state.NewKey(opts.NodeGroup, args[0])
		return err
	})
	return cmd
}
