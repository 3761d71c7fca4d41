// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/state"
)

// waitValues are what --wait waits for; --wait alone means ready.
var waitValues = []string{builtins.UntilApplied, builtins.UntilReady}

// addWaitFlag adds --wait[=applied|ready] to a command.
func addWaitFlag(cmd *cobra.Command, p *string, what string) {
	f := cmd.Flags()
	f.Var(newEnumValue(p, "", "wait goal", waitValues...), "wait", what+": --wait (or --wait=ready) until every expected node runs the committed revision and kubelet reports it ready, --wait=applied until every node runs it; ends with --timeout (exit 124), or exit 1 when a node reports an error for the revision")
	f.Lookup("wait").NoOptDefVal = builtins.UntilReady
}

func newStatusCmd(env *builtins.Env) *cobra.Command {
	var opts builtins.StatusOptions
	var wait, out string
	var watch bool
	cmd := &cobra.Command{
		Annotations: map[string]string{noDeadlineWith: "watch"},
		Use:         "status [NAME] [-g NODEGROUP] [--wait[=applied|ready] | --watch]",
		Short:       "Show what the nodes run: per deployment, revision applied and ready",
		Long: `Status shows the observed state of committed deployments, as the nodes report
it: per deployment the committed revision, how many of the NodeGroup's expected
nodes run it (applied) and how many kubelet reports ready, the age of the oldest
report, the nodes waiting for a rollout slot and every error a node reports for
the revision (payload, secret, identity, file, kubelet, or a rollout slot that
timed out). A Pod with a container without a readiness probe, which kubelet calls
ready as soon as it starts, counts as ready once kubelet has reported it ready
for 5 s.

The coordination leader publishes one status object per NodeGroup at
status/nodegroups/<nodegroup>.json, rewritten only when it changes: status reads
the index, the lease dns/leader.json and one object per NodeGroup, whatever the
number of nodes. The expected nodes are the NodeGroup's configured size (setup's
size=N); a node that stopped reporting shows as missing. When no leader holds a
live lease, or a new leader is still collecting reports, the state is unknown
and status says why: it never reports a state it cannot prove current.

Status exits 0 whatever the state (it reports). With --wait it is a gate: it
waits until the selected deployments are applied (--wait=applied) or ready
(--wait, --wait=ready) on every expected node, shows progress on standard error,
and exits 124 when --timeout passes first (naming what is missing) and 1 when a
node reports an error for the revision. Only an error a node reported after it
read the commit naming the revision counts; one already reported when the wait
began (perhaps fixed since, outside the manifest: a secret created, an image
pushed again) ends the wait only once the node reports it again, or when it still
stands 1 minute later. A wait on a cluster where setup never ran and no agent ever
took part in coordination fails at once (exit 1): no node can ever report. A
deployment name needs its NodeGroup (-g); a name that is not committed exits 3.

With --watch it is a live view: it reads the status every second until every
deployment shown is ready, or until Ctrl-C (exit 130). On a terminal it redraws
one line per deployment and one per node reporting about it, in place; when
standard output is not a terminal (a pipe, a log) it prints a line only when
what it shows changed. A node's error is shown, and does not end the watch.
--watch has no deadline unless --timeout is given, and takes neither -o json
nor --wait: scripts and recipes gate on --wait (podmin.deployments.wait).

When deployments/index.json is missing from a bucket that holds Pod payloads or
NodeGroup views, what is committed is unknown: status says so (indexMissing in
-o json) and exits 1; run "podmin index rebuild".`,
		Example: `  podmin status
  podmin status -g workers
  podmin status web -g workers -o json
  podmin status web -g workers --wait --timeout 5m
  podmin status -g workers --watch`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.MaximumNArgs(1)(cmd, args); err != nil {
				return err
			}
			if len(args) == 1 && opts.NodeGroup == "" {
				return errors.New("a deployment name needs its NodeGroup: pass -g NODEGROUP")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			if watch && wait != "" {
				return usageError{errors.New("--watch shows the status until it is ready, and --wait gates on it: pass one of them")}
			}
			if watch && out != "table" {
				return usageError{fmt.Errorf("--watch draws for people, and -o %s is for scripts: use --wait with -o %[1]s to gate on readiness, or leave -o out", out)}
			}
			if len(args) == 1 {
				opts.Name = args[0]
			}
			if watch {
				err := watchStatus(cmd, env, opts)
				if errors.Is(err, builtins.ErrNoDeployment) {
					return notFoundError{err}
				}
				return err
			}
			res, err := env.Status(cmd.Context(), opts)
			if errors.Is(err, builtins.ErrNoDeployment) {
				return notFoundError{err}
			}
			if res.IndexMissing {
				// What is committed is unknown: said on standard output
				// (indexMissing in -o json) and failed, never waited on.
				_ = printStatus(cmd.OutOrStdout(), out, res)
				return err
			}
			if err != nil {
				return err
			}
			if wait != "" {
				var werr error
				if res, werr = waitAll(cmd, env, res, wait); werr != nil {
					_ = printStatus(cmd.OutOrStdout(), out, res)
					return werr
				}
			}
			return printStatus(cmd.OutOrStdout(), out, res)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.NodeGroup, "nodegroup", "g", "", "show this NodeGroup only (required with NAME)")
	addWaitFlag(cmd, &wait, "wait")
	f.BoolVar(&watch, "watch", false, "show the status live until every deployment shown is ready: redrawn on a terminal, a line per change elsewhere; no deadline unless --timeout is given")
	addOutputFlag(cmd, &out)
	return cmd
}

// waitAll waits for every deployment of res in turn, within the command's
// deadline, and returns the status read afterwards.
func waitAll(cmd *cobra.Command, env *builtins.Env, res builtins.StatusResult, until string) (builtins.StatusResult, error) {
	opts := builtins.StatusOptions{}
	for _, g := range res.NodeGroups {
		for _, d := range g.Deployments {
			if _, err := env.Wait(cmd.Context(), builtins.WaitOptions{Name: d.Name, NodeGroup: d.NodeGroup, Until: until}); err != nil {
				return res, err
			}
		}
		if len(res.NodeGroups) == 1 {
			opts.NodeGroup = g.NodeGroup
		}
	}
	if len(res.NodeGroups) == 1 && len(res.NodeGroups[0].Deployments) == 1 {
		opts.Name = res.NodeGroups[0].Deployments[0].Name
	}
	return env.Status(cmd.Context(), opts)
}

// printStatus writes the result as a table (one row per deployment, then
// what keeps each from being ready) or as JSON/YAML.
func printStatus(w io.Writer, format string, res builtins.StatusResult) error {
	return printResult(w, format, res, func(w io.Writer) error {
		rows := 0
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODEGROUP\tNAME\tREVISION\tSTATE\tAPPLIED\tREADY\tAGE")
		var notes []string
		for _, g := range res.NodeGroups {
			for _, d := range g.Deployments {
				rows++
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%d/%d\t%s\n", d.NodeGroup, d.Name, shortRev(d.Revision), d.State, d.Applied, d.Total, d.Ready, d.Total, age(d.OldestReport, d.AgeSeconds))
				if d.State != builtins.StateReady {
					notes = append(notes, fmt.Sprintf("%s/%s: %s", d.NodeGroup, d.Name, d.Summary))
				}
			}
			if g.Problem != "" && len(g.Deployments) == 0 {
				notes = append(notes, fmt.Sprintf("NodeGroup %s: %s", g.NodeGroup, g.Problem))
			}
			for _, r := range g.Refused {
				notes = append(notes, fmt.Sprintf("NodeGroup %s: node %s at %s is refused by the leader since %s: %s",
					g.NodeGroup, r.Node, r.Address, r.Since.UTC().Format(time.RFC3339), r.Reason))
			}
		}
		if res.IndexMissing {
			_, err := fmt.Fprintf(w, "deployments/index.json is missing: what is committed is unknown; %s\n", state.RebuildAdvice)
			return err
		}
		if rows == 0 {
			_, err := fmt.Fprintln(w, "no deployments committed")
			for _, n := range notes {
				fmt.Fprintln(w, n)
			}
			return err
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, n := range notes {
			if _, err := fmt.Fprintln(w, n); err != nil {
				return err
			}
		}
		return nil
	})
}

func shortRev(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// age renders the age of the oldest report as people read it ("-" when
// there is none).
func age(oldest *time.Time, seconds float64) string {
	if oldest == nil {
		return "-"
	}
	d := time.Duration(seconds * float64(time.Second))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// waitNote is the line deploy prints after a wait that reached its goal.
func waitNote(w *builtins.WaitResult) string {
	n := w.Ready
	if w.Until == builtins.UntilApplied {
		n = w.Applied
	}
	return fmt.Sprintf("%s/%s revision %s %s on %d/%d nodes after %s\n", w.NodeGroup, w.Name, shortRev(w.Revision), w.Until, n, w.Total,
		time.Duration(w.WaitedSeconds*float64(time.Second)).Round(time.Millisecond))
}
