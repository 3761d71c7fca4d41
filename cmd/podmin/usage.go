// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// checkUsage adds check to cmd's argument check. Cobra runs argument
// checks before the persistent pre-run hook, so check runs before any
// context, confirmation or network access, and what it refuses is bad
// usage (exit 2, with the help hint). It runs after the required flags
// are known to be present, so it can name what is wrong with them.
func checkUsage(cmd *cobra.Command, check func(args []string) error) {
	count := cmd.Args
	cmd.Args = func(c *cobra.Command, args []string) error {
		if count != nil {
			if err := count(c, args); err != nil {
				return err
			}
		}
		if err := c.ValidateRequiredFlags(); err != nil {
			return err
		}
		return check(args)
	}
}

// requireFlags marks flags of cmd required: their absence is bad usage,
// reported before anything else runs.
func requireFlags(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		if err := cmd.MarkFlagRequired(n); err != nil {
			panic(fmt.Sprintf("%s: %v", cmd.CommandPath(), err)) // a Podmin bug
		}
	}
}

// oneOf refuses two flags given together.
func conflicting(cmd *cobra.Command, a, b, why string) error {
	if cmd.Flags().Changed(a) && cmd.Flags().Changed(b) {
		return fmt.Errorf("--%s and --%s cannot be combined: %s", a, b, why)
	}
	return nil
}

// shells are the shells "podmin completion" writes a script for.
var shells = []string{"bash", "zsh", "fish", "powershell"}

// strictCompletion makes "podmin completion" without a shell, or with one
// it does not know, bad usage instead of a help text and exit status 0.
func strictCompletion(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Args = func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown shell %q: podmin completion writes a script for %s", args[0], orList(shells))
			}
			return nil
		}
		c.RunE = func(*cobra.Command, []string) error {
			return usageError{fmt.Errorf("name the shell: podmin completion %s", strings.Join(shells, "|"))}
		}
	}
}

// newHelpCmd is "podmin help [COMMAND]". Unlike Cobra's, an unknown topic
// is bad usage (exit 2), not a help text and exit status 0.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long: `Help shows the help of any command or topic, e.g. "podmin help deploy" or
"podmin help starlark".`,
		Annotations: map[string]string{noContext: "true"},
		ValidArgsFunction: func(c *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []string
			for _, sub := range cmd.Commands() {
				if (sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand()) && strings.HasPrefix(sub.Name(), prefix) {
					out = append(out, sub.Name()+"\t"+sub.Short)
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				return usageError{fmt.Errorf("unknown help topic %q: run \"podmin help\" to list the commands and topics", strings.Join(args, " "))}
			}
			cmd.InitDefaultHelpFlag()
			return cmd.Help()
		},
	}
}
