// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

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
			}
		}
	}
}
