// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/scrub"
)

// destructiveAnnotation marks a command that deletes or destroys
// something; its Starlark twin is a Builtin with Destructive set, and the
// parity test checks that both sides carry the guard.
const destructiveAnnotation = "podmin.dev/destructive"

// destructive marks cmd and gives it --yes/-y, bound to yes.
func destructive(cmd *cobra.Command, yes *bool) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[destructiveAnnotation] = "true"
	cmd.Flags().BoolVarP(yes, "yes", "y", false, "confirm without a prompt (needed when standard input is not a terminal)")
}

// confirm is the one confirmation of every destructive command: --yes
// passes; on a terminal the operator types the cluster ID; otherwise it
// fails with builtins.ErrNotConfirmed (exit status 4) and says how to
// confirm. It never waits for input that is not a terminal.
func confirm(cmd *cobra.Command, env *builtins.Env, yes bool, what, cluster string) error {
	if yes {
		return nil
	}
	f := terminal(env)
	if f == nil {
		return fmt.Errorf("%w: %s; standard input is not a terminal to confirm it: pass --yes (-y) to %s", builtins.ErrNotConfirmed, what, cmd.CommandPath())
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s. Type the cluster ID (%s) to confirm: ", upperFirst(what), cluster)
	line, err := readLine(f)
	if err != nil {
		return fmt.Errorf("%w: read confirmation: %w", builtins.ErrNotConfirmed, err)
	}
	if line != cluster {
		return fmt.Errorf("%w: you typed %s, not the cluster ID %q; nothing was changed", builtins.ErrNotConfirmed, scrub.Quote(line), cluster)
	}
	return nil
}

func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
