// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/contexts"
)

// selectsContext are the commands without a required context that still
// use one when --context names it: a recipe's run and session select
// their cluster with it, and use lists which context is in effect.
var selectsContext = map[string]bool{"podmin run": true, "podmin repl": true, "podmin use": true}

// selectContext sets the context this invocation uses: --context, else
// PODMIN_CONTEXT, else (the zero Selection) the machine-wide current one.
// Only env changes, never the contexts file, so two shells on two
// clusters do not race on it.
func selectContext(cmd *cobra.Command, env *builtins.Env, flag string) error {
	if cmd.Flags().Changed("context") {
		if flag == "" {
			return usageError{fmt.Errorf("--context needs a context name: \"podmin use\" lists the saved ones")}
		}
		needs := true
		for c := cmd; c != nil; c = c.Parent() {
			needs = needs && c.Annotations[noContext] != "true"
		}
		if !needs && !selectsContext[cmd.CommandPath()] {
			return usageError{fmt.Errorf("%q uses no cluster, so --context has no meaning here: leave it out", cmd.CommandPath())}
		}
	}
	var fromEnv string
	if env.LookupEnv != nil {
		fromEnv, _ = env.LookupEnv(contexts.EnvVar)
	}
	env.Selection = contexts.Select(flag, fromEnv)
	if env.Selection.Source == contexts.SourceFlag && cmd.CommandPath() != "podmin use" {
		// A named context that is not saved is bad usage, found before
		// any network access.
		if _, err := env.CurrentContext(); err != nil {
			return usageError{err}
		}
	}
	return nil
}

// selectionNote says on standard error that a context other than the
// machine-wide current one is in effect for this shell, after a command
// that changed the current one.
func selectionNote(sel contexts.Selection, current string) string {
	if sel.Name == "" || sel.Name == current {
		return ""
	}
	return fmt.Sprintf("note: %s is the current context now, but %s=%s selects %s in this shell: unset %s to use %s here",
		current, contexts.EnvVar, sel.Name, sel.Name, contexts.EnvVar, current)
}
