// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
)

func newPreviewCmd(env *builtins.Env) *cobra.Command {
	var opts builtins.PreviewOptions
	var out string
	cmd := &cobra.Command{
		Use:   "preview -g NODEGROUP [--out DIR]",
		Short: "Show the static Pod files a node of a NodeGroup would write",
		Long: `Preview reads the committed deployments/index.json and the verified Pod payloads
of one NodeGroup and renders exactly the static Pod files a node of that NodeGroup
writes to /etc/podmin/manifests, with the same node transformation the agent uses:
the podmin.dev/revision annotation and one read-only volume per secrets provider,
mounted at /var/run/podmin/<provider>.

Secret values are never read: preview shows only which keys are mounted where.
Without --out the files are printed as one YAML stream, each preceded by a
"# <file>" comment; with --out they are written into DIR (other files there
are left alone).`,
		Example: `  podmin preview -g workers
  podmin preview -g workers --out ./rendered`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			res, err := env.Preview(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error {
				if len(res.Files) == 0 {
					_, err := fmt.Fprintf(w, "NodeGroup %s has no committed deployments: a node would write no static Pods\n", res.NodeGroup)
					return err
				}
				if opts.Out != "" {
					for _, f := range res.Files {
						fmt.Fprintf(w, "%s\t%s (revision %s)\n", f.Path, f.Deployment, f.Revision)
					}
					return nil
				}
				for i, f := range res.Files {
					if i > 0 {
						fmt.Fprintln(w, "---")
					}
					fmt.Fprintf(w, "# %s/%s\n", res.Dir, f.File)
					for _, m := range f.Mounts {
						fmt.Fprintf(w, "# mounts %s keys %s at %s (values not shown)\n", m.Provider, strings.Join(m.Keys, ","), m.MountPath)
					}
					if _, err := io.WriteString(w, f.YAML); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.NodeGroup, "nodegroup", "g", "", "NodeGroup whose node to preview (required)")
	f.StringVar(&opts.Out, "out", "", "write the files into this directory instead of printing them")
	_ = cmd.MarkFlagRequired("nodegroup")
	addOutputFlag(cmd, &out)
	return cmd
}
