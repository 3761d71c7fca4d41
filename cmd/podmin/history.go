// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/state"
)

func newHistoryCmd(env *builtins.Env) *cobra.Command {
	var opts builtins.HistoryOptions
	var out string
	cmd := &cobra.Command{
		Use:   "history NAME -g NODEGROUP",
		Short: "List a deployment's recorded revisions",
		Long: `History lists the revisions the deployment's entry in deployments/index.json
records, newest first: the revision number, whether it is current, the
podmin.dev/revision nodes derive from its payloads, its images, and when and by
which index write (the ID in the index object's podmin-write-id metadata) it was
committed. An entry keeps its last 10 revisions; delete drops them with the
entry. A revision committed before revisions were recorded shows "-" for what is
unknown about it.

It exits 3 when the deployment does not exist.`,
		Example: `  podmin history web -g workers
  podmin history web -g workers -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			opts.Name = args[0]
			res, err := env.History(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "REVISION\tCURRENT\tPOD REVISION\tIMAGES\tTIME\tWRITE")
				for _, r := range res.Revisions {
					n, cur := "-", ""
					if r.Revision > 0 {
						n = strconv.Itoa(r.Revision)
					}
					if r.Current {
						cur = "*"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n, cur, shortRev(r.PodRevision), dash(strings.Join(r.Images, ",")), dash(r.Time), dash(r.Write))
				}
				return tw.Flush()
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.NodeGroup, "nodegroup", "g", "", "NodeGroup of the deployment (required)")
	addOutputFlag(cmd, &out)
	requireFlags(cmd, "nodegroup")
	checkUsage(cmd, func(args []string) error {
		_, err := state.NewKey(opts.NodeGroup, args[0])
		return err
	})
	return cmd
}

func newRollbackCmd(env *builtins.Env) *cobra.Command {
	var opts builtins.RollbackOptions
	var out string
	cmd := &cobra.Command{
		Use:   "rollback NAME -g NODEGROUP [--to-revision N] [--wait]",
		Short: "Commit an earlier revision of a deployment again",
		Long: `Rollback restores an earlier revision that "podmin history" lists: it reads
that revision's Pod (and Service) payloads from the bucket, verifies them against
the SHA-512 in their paths, and commits them with the same compare-and-swap write
as deploy. The result is a new revision with the earlier payloads, so a rollback
can itself be rolled back. Without --to-revision it restores the newest recorded
revision whose payloads differ from the current ones.

A revision that is not recorded exits 3 and writes nothing; so does a payload
that is missing or corrupt in the bucket (exit 1). With --wait it waits for the
nodes exactly as deploy --wait does (exit 124 when --timeout passes first).
A write whose reply was lost and cannot be resolved exits 6, as deploy does.`,
		Example: `  podmin rollback web -g workers
  podmin rollback web -g workers --to-revision 3 --wait --timeout 5m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			opts.Name = args[0]
			res, err := env.Rollback(cmd.Context(), opts)
			if err != nil && res.Wait == nil {
				return err
			}
			if err != nil {
				_ = printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error { return nil })
				return err
			}
			return printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error {
				target := res.NodeGroup + "/" + res.Name
				if res.Action == "unchanged" {
					fmt.Fprintf(w, "%s unchanged: the committed desired state already holds revision %d's payloads; nothing was written\n", target, res.To)
				} else {
					fmt.Fprintf(w, "%s rolled back to revision %d (pod revision %s): desired state committed to deployments/index.json in bucket %s\n", target, res.To, shortRev(res.Revision), res.Bucket)
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
	f.StringVarP(&opts.NodeGroup, "nodegroup", "g", "", "NodeGroup of the deployment (required)")
	f.IntVar(&opts.ToRevision, "to-revision", 0, "the revision to restore, as history lists it (default: the newest one with other payloads than the current)")
	addWaitFlag(cmd, &opts.Wait, "after the commit, wait")
	addOutputFlag(cmd, &out)
	requireFlags(cmd, "nodegroup")
	checkUsage(cmd, func(args []string) error {
		if opts.ToRevision < 0 {
			return fmt.Errorf("--to-revision must be a revision number (1 or more), not %d", opts.ToRevision)
		}
		_, err := state.NewKey(opts.NodeGroup, args[0])
		return err
	})
	return cmd
}
