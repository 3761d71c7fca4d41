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
)

// newInstallCmds returns install and uninstall, each with the one managed
// component Podmin knows, cloudflared.
func newInstallCmds(env *builtins.Env) []*cobra.Command {
	install := &cobra.Command{
		Use:   "install",
		Short: "Install a Podmin-managed component (cloudflared)",
		Example: `  podmin install cloudflared -g edge
  podmin install cloudflared -g edge --provider aws-parameter-store -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	install.AddCommand(newInstallCloudflaredCmd(env))
	uninstall := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove a Podmin-managed component (cloudflared)",
		Example: `  podmin uninstall cloudflared -g edge
  podmin uninstall cloudflared -g edge -y`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	uninstall.AddCommand(newUninstallCloudflaredCmd(env))
	return []*cobra.Command{install, uninstall}
}

func newInstallCloudflaredCmd(env *builtins.Env) *cobra.Command {
	var opts builtins.InstallCloudflaredOptions
	var out string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "cloudflared -g NODEGROUP [--provider P]",
		Short: "Run a Cloudflare Tunnel connector on every node of a NodeGroup",
		Long: `Install cloudflared commits a hardened platform-cloudflared/cloudflared static Pod
to every VM of NODEGROUP.

The tunnel token must exist first, at
/<cluster>/platform-cloudflared/cloudflared/tunnel-token in the context's
secrets provider (or --provider):

  podmin secret create tunnel-token --for cloudflared -n platform-cloudflared

Only its existence is checked; the value is mounted into the Pod read-only and
never enters the bucket. The Podmin-pinned multi-platform cloudflared image is
mirrored beneath mirror/ when the mirror does not already hold its digest; when
it does, the image's manifests are read and verified and its other blobs
checked, and any that are missing or damaged are written again (mirror action
"repaired"). Running the command again also checks that the committed Pod
payload is still present and intact, writes nothing and reports "unchanged"; a
payload that was removed or damaged is rewritten and the command reports
"repaired". Cloudflare routes target Podmin Service DNS names directly.

With --dry-run it runs over the recording boundaries of "podmin run --dry-run"
and prints the plan (the mirrored image objects, the Pod payload and the index
entry it would write, with diffs) instead of writing; -o json prints the plan
document.`,
		Example: `  podmin secret create tunnel-token --for cloudflared -n platform-cloudflared --file token.txt
  podmin install cloudflared -g edge
  podmin install cloudflared -g edge --provider aws-secrets-manager -o json
  podmin install cloudflared -g edge --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			if dryRun {
				return printDryRun(cmd, env, "install cloudflared", "", out, func(ctx context.Context, ops *builtins.Env) error {
					_, err := ops.InstallCloudflared(ctx, opts)
					return err
				})
			}
			res, err := env.InstallCloudflared(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "image %s %s\n%s/%s %s in bucket %s (namespace %s); nodes start it when they next reconcile\n",
					res.Image, res.Mirror.Action, res.NodeGroup, res.Name, res.Action, res.Bucket, res.Namespace)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.NodeGroup, "nodegroup", "g", "", "NodeGroup to run cloudflared on (required)")
	f.StringVar(&opts.Provider, "provider", "", "secrets provider holding the tunnel token (default: the context's)")
	addOutputFlag(cmd, &out)
	addDryRunFlag(cmd, &dryRun)
	requireFlags(cmd, "nodegroup")
	return cmd
}

func newUninstallCloudflaredCmd(env *builtins.Env) *cobra.Command {
	var opts builtins.UninstallCloudflaredOptions
	var yes, dryRun bool
	var out string
	cmd := &cobra.Command{
		Use:   "cloudflared -g NODEGROUP [-y]",
		Short: "Remove the cloudflared install from a NodeGroup",
		Long: `Uninstall cloudflared removes the deployment "podmin install cloudflared" committed
to NODEGROUP; a deployment of that name that it did not create is refused. The
mirrored image and the tunnel token stay.

Uninstall is destructive: on a terminal it asks you to type the cluster ID;
--yes/-y confirms without asking and is needed when standard input is not a
terminal (exit status 4 otherwise). With --dry-run it needs no confirmation:
it runs over the recording boundaries of "podmin run --dry-run" and prints the
plan (the index entry it would remove) instead of writing.`,
		Example: `  podmin uninstall cloudflared -g edge
  podmin uninstall cloudflared -g edge --dry-run
  podmin uninstall cloudflared -g edge -y -o json`,
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
				return printDryRun(cmd, env, "uninstall cloudflared", "", out, func(ctx context.Context, ops *builtins.Env) error {
					_, err := ops.UninstallCloudflared(ctx, opts)
					return err
				})
			}
			if err := confirm(cmd, env, yes, fmt.Sprintf("uninstalling cloudflared removes its Pod from every node of %s", opts.NodeGroup), c.Cluster); err != nil {
				return err
			}
			res, err := env.UninstallCloudflared(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error {
				if res.Action == "absent" {
					_, err := fmt.Fprintf(w, "cloudflared is not installed on %s: nothing was changed\n", res.NodeGroup)
					return err
				}
				_, err := fmt.Fprintf(w, "%s/%s deleted from the desired state; nodes remove its Pod when they next reconcile\n", res.NodeGroup, res.Name)
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&opts.NodeGroup, "nodegroup", "g", "", "NodeGroup to remove cloudflared from (required)")
	destructive(cmd, &yes)
	addOutputFlag(cmd, &out)
	addDryRunFlag(cmd, &dryRun)
	requireFlags(cmd, "nodegroup")
	return cmd
}
