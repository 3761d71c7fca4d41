// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// completionInstall is the one-line install of each shell's completion,
// as the README gives it.
var completionInstall = map[string]string{
	"bash":       `podmin completion bash > /etc/bash_completion.d/podmin`,
	"zsh":        `podmin completion zsh > "${fpath[1]}/_podmin"`,
	"fish":       `podmin completion fish > ~/.config/fish/completions/podmin.fish`,
	"powershell": `podmin completion powershell | Out-String | Invoke-Expression`,
}

// exampleGeneratedCommands gives Cobra's own help and completion commands
// examples like every other command.
func exampleGeneratedCommands(root *cobra.Command) {
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help":
			c.Example = `  podmin help deploy
  podmin help starlark`
		case "completion":
			c.Example = `  podmin completion bash > /etc/bash_completion.d/podmin
  source <(podmin completion bash)`
			for _, sh := range c.Commands() {
				if line, ok := completionInstall[sh.Name()]; ok {
					sh.Example = fmt.Sprintf("  %s\n  podmin completion %s --no-descriptions > podmin.%s", line, sh.Name(), sh.Name())
				}
				writeToCommandOutput(sh)
			}
		}
	}
}

// writeToCommandOutput makes a completion command write its script to the
// command's output, as every other command does. Cobra binds it to the
// output known when the command is created, which is before the CLI sets
// its (scrubbing) standard output.
func writeToCommandOutput(sh *cobra.Command) {
	gen := map[string]func(root *cobra.Command, w io.Writer, desc bool) error{
		"bash": func(root *cobra.Command, w io.Writer, desc bool) error { return root.GenBashCompletionV2(w, desc) },
		"zsh": func(root *cobra.Command, w io.Writer, desc bool) error {
			if desc {
				return root.GenZshCompletion(w)
			}
			return root.GenZshCompletionNoDesc(w)
		},
		"fish": func(root *cobra.Command, w io.Writer, desc bool) error { return root.GenFishCompletion(w, desc) },
		"powershell": func(root *cobra.Command, w io.Writer, desc bool) error {
			if desc {
				return root.GenPowerShellCompletionWithDesc(w)
			}
			return root.GenPowerShellCompletion(w)
		},
	}[sh.Name()]
	if gen == nil {
		return
	}
	sh.Run = nil
	sh.RunE = func(cmd *cobra.Command, _ []string) error {
		noDesc, _ := cmd.Flags().GetBool("no-descriptions")
		return gen(cmd.Root(), cmd.OutOrStdout(), !noDesc)
	}
}
