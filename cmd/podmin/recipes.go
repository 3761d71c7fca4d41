// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

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
  podmin recipes lock recipes/
  podmin recipes add platform https://example.com/platform-recipes.git@v1.4.0
  podmin recipes update platform`,
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
podmin run, test and repl check every loaded file against.

A git pin's digests are its commit's content: the cached clone is proven to be
exactly the commit from the commit's own objects. Lock refuses a clone with a
file edited, added or removed (tampering or corruption: remove the clone, it is
cloned again), and digests locked for the same commit that differ from its
content.`,
		Example: `  podmin recipes lock
  podmin recipes lock recipes/`,
		Args:        cobra.MaximumNArgs(1),
		Annotations: map[string]string{noContext: "true"},
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			report, err := pstar.LockRecipes(dir, env.Dirs.Cache)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, r := range report.Repos {
				fmt.Fprintf(w, "@%s: %d files, %s: %s\n", r.Name, r.Files, r.Digest, lockChangeSummary(r))
				for _, f := range r.Changed {
					fmt.Fprintf(w, "  changed %s\n", f)
				}
				for _, f := range r.Added {
					fmt.Fprintf(w, "  added   %s\n", f)
				}
				for _, f := range r.Removed {
					fmt.Fprintf(w, "  removed %s\n", f)
				}
			}
			fmt.Fprintf(w, "wrote %s\n", report.Path)
			return nil
		},
	})
	cmd.AddCommand(newRecipesAddCmd(env), newRecipesUpdateCmd(env))
	return cmd
}

// lockChangeSummary says in a few words how a repository's pin changed.
func lockChangeSummary(r pstar.RepoChange) string {
	switch {
	case r.First:
		return "pinned for the first time"
	case len(r.Added)+len(r.Changed)+len(r.Removed) == 0:
		return "unchanged"
	}
	return fmt.Sprintf("%d changed, %d added, %d removed since the previous lock (review them)", len(r.Changed), len(r.Added), len(r.Removed))
}
