// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/contexts"
)

func newConnectCmd(env *builtins.Env) *cobra.Command {
	var opts builtins.ConnectOptions
	var out string
	cmd := &cobra.Command{
		Use:   "connect CLUSTER --provider aws|local --bucket BUCKET",
		Short: "Connect to a cluster's bucket, creating it when absent, and select it",
		Long: `Connect saves a context for CLUSTER and selects it.

It creates the bucket when it is absent. Just before, it draws a random nonce,
records it in the context and tags the bucket with it (podmin:create-nonce) and
with podmin:cluster=CLUSTER. Only that nonce proves the bucket Podmin's (nobody
else holds it), so destroy may delete it. A tag names a cluster but proves
nothing: an existing bucket is used but never claimed, whatever its tags say,
and one tagged for another cluster is refused. Connect verifies the bucket's
region and proves read, write and delete access with a short-lived probe object
before anything is saved.

A saved context keeps its bucket: connecting CLUSTER to another bucket or
provider (a typo in --bucket, say) is refused before anything is created,
unless --replace is given; then connect says on standard error what it
replaced. A context keeps the nonce of every bucket it created, so connecting
back to one of them proves it Podmin's again, and destroy can delete it.

With --provider local the bucket is a directory: an absolute --bucket path is
used as it is, a plain name lives under the Podmin data directory.

CLUSTER is 1-32 lowercase letters, digits and hyphens, starting with a letter.`,
		Example: `  podmin connect demo --provider local --bucket demo
  podmin connect prod --provider aws --bucket acme-podmin-prod --region eu-west-1 --profile prod
  podmin connect prod --provider aws --bucket acme-podmin-prod-2 --replace`,
		Args:        cobra.ExactArgs(1),
		Annotations: map[string]string{noContext: "true"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			opts.Cluster = args[0]
			sel := env.Selection
			res, err := env.Connect(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if note := selectionNote(sel, res.Context.Cluster); note != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), note)
			}
			if res.Previous != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), replacedNote(res))
			}
			return printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error {
				c := res.Context
				state := "existing"
				if res.BucketCreated {
					state = "created"
				}
				owner := "Podmin's own (destroy may delete it)"
				if !res.BucketOwned {
					owner = "not created by Podmin for this context (used, never deleted by Podmin)"
				}
				fmt.Fprintf(w, "connected to cluster %s (provider %s, region %s)\n", c.Cluster, c.Provider, c.Region)
				fmt.Fprintf(w, "bucket %s: %s, %s\n", c.Bucket, state, owner)
				_, err := fmt.Fprintf(w, "context %s is now current (secrets provider %s)\n", c.Cluster, c.SecretsProvider)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Provider, "provider", "", "provider: aws or local (required)")
	f.StringVar(&opts.Bucket, "bucket", "", "the cluster's object storage bucket (required; created when absent)")
	f.StringVar(&opts.Region, "region", "", "region (default: the provider's configured region)")
	f.StringVar(&opts.Profile, "profile", "", "AWS shared-config profile")
	f.BoolVar(&opts.Replace, "replace", false, "connect a saved context to another bucket or provider, replacing its current one")
	f.StringVar(&opts.SecretsProvider, "secrets-provider", "", "default secrets provider: aws-parameter-store, aws-secrets-manager or local (default: aws-parameter-store on aws, local on local)")
	addOutputFlag(cmd, &out)
	requireFlags(cmd, "provider", "bucket")
	return cmd
}

// replacedNote says what a connect with --replace replaced, and which of
// the buckets the context created it still holds the proof of.
func replacedNote(res builtins.ConnectResult) string {
	p := res.Previous
	note := fmt.Sprintf("replaced context %s: it connected bucket %s (provider %s, region %s); it now connects bucket %s (provider %s, region %s)",
		p.Cluster, p.Bucket, p.Provider, p.Region, res.Context.Bucket, res.Context.Provider, res.Context.Region)
	var others []string
	for _, b := range res.Context.CreatedBuckets {
		if b.Provider != res.Context.Provider || b.Bucket != res.Context.Bucket {
			others = append(others, fmt.Sprintf("%s (provider %s)", b.Bucket, b.Provider))
		}
	}
	if len(others) > 0 {
		note += fmt.Sprintf("; it keeps the proof that Podmin created %s: connect back to one with --replace to use it again, or to destroy it", strings.Join(others, ", "))
	}
	return note
}

func newUseCmd(env *builtins.Env) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "use [CLUSTER]",
		Short: "Select a saved context, or list them",
		Long: `Use makes the saved context CLUSTER the machine-wide current context: the
commands that follow, in every shell, use it.

One command, or one shell, can use another context without changing that:
--context NAME selects the context of one command, and the PODMIN_CONTEXT
environment variable that of every command in a shell. --context beats
PODMIN_CONTEXT, which beats the current context. Two shells with different
PODMIN_CONTEXT work on their two clusters at once.

Without an argument use lists the saved contexts, marks the current one (*)
and says which context is in effect here and why (--context, PODMIN_CONTEXT
or the current context).`,
		Example: `  podmin use
  podmin use prod
  podmin use -o json
  export PODMIN_CONTEXT=staging; podmin use
  podmin list --context staging`,
		Args:        cobra.MaximumNArgs(1),
		Annotations: map[string]string{noContext: "true"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			if len(args) == 1 {
				if cmd.Flags().Changed("context") {
					return usageError{fmt.Errorf("use CLUSTER changes the current context, and --context only selects one for a command: leave --context out")}
				}
				sel := env.Selection
				c, err := env.Use(builtins.UseOptions{Cluster: args[0], Persist: true})
				if err != nil {
					return err
				}
				if note := selectionNote(sel, c.Cluster); note != "" {
					fmt.Fprintln(cmd.ErrOrStderr(), note)
				}
				return printResult(cmd.OutOrStdout(), out, c, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "context %s is now current\n", c.Cluster)
					return err
				})
			}
			list, err := env.ListContexts()
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), out, list, func(w io.Writer) error {
				if len(list) == 0 {
					_, err := fmt.Fprintln(w, "no contexts: run \"podmin connect CLUSTER --provider aws|local --bucket BUCKET\"")
					return err
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "CURRENT\tCLUSTER\tPROVIDER\tREGION\tBUCKET\tPROFILE\tSECRETS")
				for _, e := range list {
					mark := ""
					if e.Current {
						mark = "*"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", mark, e.Cluster, e.Provider, e.Region, e.Bucket, e.Profile, e.SecretsProvider)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				_, err := fmt.Fprintln(w, inEffectLine(list, env.Selection))
				return err
			})
		},
	}
	addOutputFlag(cmd, &out)
	return cmd
}

func newDisconnectCmd(env *builtins.Env) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "disconnect CLUSTER [-y]",
		Short: "Forget a context (local state only; the bucket and cloud resources stay)",
		Long: `Disconnect removes the saved context CLUSTER from this machine, with the
OpenTofu/Terraform module setup generated for it under
<cache>/infrastructure/CLUSTER. It changes nothing in the cloud: the bucket,
its contents and any infrastructure remain, and "podmin connect" can reconnect
to them later (setup regenerates the module). If CLUSTER was current, no
context is selected afterwards. A bucket this context created is not Podmin's
to delete from a later context: connect finds it existing.

On a terminal it asks you to type the cluster ID; --yes/-y confirms without
asking and is needed when standard input is not a terminal.`,
		Example: `  podmin disconnect demo
  podmin disconnect demo -y`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// An unknown context is reported as such, without a prompt.
			list, err := env.ListContexts()
			if err != nil {
				return err
			}
			if slices.ContainsFunc(list, func(e builtins.ContextEntry) bool { return e.Cluster == args[0] }) {
				if err := confirm(cmd, env, yes, "disconnecting forgets the context "+args[0]+" on this machine", args[0]); err != nil {
					return err
				}
			}
			res, err := env.Disconnect(builtins.DisconnectOptions{Cluster: args[0]})
			if err != nil {
				return err
			}
			msg := "disconnected from cluster %s (bucket %s was left untouched)\n"
			fmt.Fprintf(cmd.OutOrStdout(), msg, res.Context.Cluster, res.Context.Bucket)
			if res.WasCurrent {
				fmt.Fprintln(cmd.ErrOrStderr(), "no context is selected now: run \"podmin use CLUSTER\"")
			}
			return nil
		},
	}
	destructive(cmd, &yes)
	return cmd
}

// inEffectLine says which context this invocation uses and what selected it.
func inEffectLine(list []builtins.ContextEntry, sel contexts.Selection) string {
	for _, e := range list {
		if !e.InEffect {
			continue
		}
		switch e.SelectedBy {
		case contexts.SourceCurrent:
			return fmt.Sprintf("in effect: %s (the current context)", e.Cluster)
		case contexts.SourceEnv:
			return fmt.Sprintf("in effect: %s (selected by %s in this shell, over the current context)", e.Cluster, contexts.EnvVar)
		default:
			return fmt.Sprintf("in effect: %s (selected by %s)", e.Cluster, e.SelectedBy)
		}
	}
	if sel.Name != "" {
		return fmt.Sprintf("in effect: none: %s names %s, which is not saved: commands that use a cluster fail until it names a saved one", sel.Source, sel.Name)
	}
	return "in effect: none: no context is current: run \"podmin use CLUSTER\""
}
