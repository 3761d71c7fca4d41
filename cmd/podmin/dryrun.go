// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	pstar "podmin.dev/podmin/starlark"
)

// dryRunHelp is the --dry-run flag's text on every command that has it.
const dryRunHelp = "perform reads, record writes and print the plan and diff instead of changing anything (as podmin run --dry-run does for a recipe); needs no confirmation"

// addDryRunFlag adds --dry-run to a command that writes cluster state.
func addDryRunFlag(cmd *cobra.Command, p *bool) {
	cmd.Flags().BoolVar(p, "dry-run", false, dryRunHelp)
}

// printDryRun runs op (the command's own operation) over the recording
// boundaries of a recipe's dry run and prints the plan: as text, or as
// the plan document with -o json or -o yaml. Nothing real is written.
func printDryRun(cmd *cobra.Command, env *builtins.Env, command, subject, out string, op func(ctx context.Context, ops *builtins.Env) error) error {
	run, err := pstar.DryRunCommand(cmd.Context(), env, command, subject, op)
	if err != nil {
		return err
	}
	var buf strings.Builder
	if err := writePlan(&buf, run.Plan, out); err != nil {
		return err
	}
	_, err = cmd.OutOrStdout().Write([]byte(buf.String()))
	return err
}
