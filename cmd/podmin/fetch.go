// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/builtins/deps"
)

func newFetchCmd(env *builtins.Env) *cobra.Command {
	var opts deps.FetchOptions
	var out string
	cmd := &cobra.Command{
		Use:   "fetch [--arch ARCH]... [--otel-logs] [--agent-source PATH]",
		Short: "Download and verify the node dependencies into the local cache",
		Long: `Fetch resolves the node dependencies exactly as setup does (the greatest stable
release of each pinned major, with the strongest digest its publisher provides,
SHA-512 where published) and downloads them into <cache>/dependencies, verifying
every digest. Valid cached files are kept; corrupt ones are downloaded again.
It never reads or writes the cluster bucket, so a later setup finds the files
ready and only uploads what the cluster's manifest lacks.`,
		Example: `  podmin fetch
  podmin fetch --arch arm64 --otel-logs
  podmin fetch --agent-source ~/src/podmin`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			opts.CacheDir = env.Dirs.Cache
			if env.Transport != nil {
				opts.Client = &http.Client{Transport: env.Transport}
			}
			opts.Progress = func(msg string) { fmt.Fprintln(cmd.ErrOrStderr(), msg) }
			if opts.AgentSource != "" && env.WorkDir != "" && !filepath.IsAbs(opts.AgentSource) {
				opts.AgentSource = filepath.Join(env.WorkDir, opts.AgentSource)
			}
			res, err := deps.Fetch(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), out, res, func(w io.Writer) error {
				for _, f := range res.Files {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\n", f.Key, f.Arch, f.Version, f.Digest, f.Size)
				}
				_, err := fmt.Fprintf(w, "%d files in %s\n", len(res.Files), res.Dir)
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&opts.Arch, "arch", nil, "architecture to fetch, amd64 or arm64 (repeatable; default both)")
	f.BoolVar(&opts.OTelLogs, "otel-logs", false, "also fetch the log-export packages (Fluent Bit and libpq5)")
	f.StringVar(&opts.AgentSource, "agent-source", "", "cross-compile podmin-agent from this Podmin checkout instead of fetching the published agent")
	addOutputFlag(cmd, &out)
	// An unknown architecture is bad usage, told before anything else.
	checkUsage(cmd, func([]string) error {
		_, err := deps.ParseArchs(opts.Arch)
		return err
	})
	return cmd
}
