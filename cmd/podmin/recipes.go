// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	pstar "podmin.dev/podmin/starlark"
)

func newRecipesCmd(env *builtins.Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "recipes",
		Short: "Manage shared Starlark recipes (podmin.star.lock)",
		Long: `Recipes manages the shared recipe repositories that @name//path loads refer to.
They are pinned in podmin.star.lock at the recipe root, each to a local path or a
git URL and commit, and to the SHA-256 of every .star file: a file that changed
since it was locked refuses to load.`,
		Example: `  podmin recipes lock
  podmin recipes lock recipes/`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{noContext: "true"},
		RunE:        func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "lock [DIR]",
		Short: "Pin the content of every repository in DIR/podmin.star.lock",
		Long: `Lock reads DIR/podmin.star.lock (DIR defaults to "."), fetches each git
repository at its pinned commit into the Podmin cache as a load would, and
records the SHA-256 of each of its .star files and a digest over them all.
Review a repository's changes before you lock it again: the digests are what
podmin run, test and repl check every loaded file against.`,
		Example: `  podmin recipes lock
  podmin recipes lock recipes/`,
		Args:        cobra.MaximumNArgs(1),
		Annotations: map[string]string{noContext: "true"},
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			path, lk, err := pstar.LockRecipes(dir, env.Dirs.Cache)
			if err != nil {
				return err
			}
			names := make([]string, 0, len(lk.Recipes))
			for n := range lk.Recipes {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				e := lk.Recipes[n]
				fmt.Fprintf(cmd.OutOrStdout(), "@%s: %d files, %s\n", n, len(e.Files), e.Digest)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", path)
			return nil
		},
	})
	return cmd
}
