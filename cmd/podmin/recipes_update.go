// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	pstar "podmin.dev/podmin/starlark"
)

// recipeReviewFlags are the flags of the commands that move a pin: the
// change is shown, then accepted on a prompt or with --yes.
type recipeReviewFlags struct {
	dir    string
	yes    bool
	dryRun bool
}

func (f *recipeReviewFlags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.dir, "dir", ".", "the recipe root whose podmin.star.lock to change")
	cmd.Flags().BoolVarP(&f.yes, "yes", "y", false, "accept the change without a prompt (needed when standard input is not a terminal)")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "show the change and leave podmin.star.lock as it is")
}

func newRecipesAddCmd(env *builtins.Env) *cobra.Command {
	var f recipeReviewFlags
	cmd := &cobra.Command{
		Use:   "add NAME SOURCE@PIN",
		Short: "Pin a new shared recipe repository in podmin.star.lock",
		Long: `Add pins a new repository, loaded as @NAME//path.star, in the lock file of
the recipe root (--dir, created when there is none). SOURCE@PIN is a git URL
or path and the commit, branch or tag to pin (the pin is what follows the last
"@"): a branch or tag is resolved to its commit now and recorded, so
"podmin recipes update" follows it later. A SOURCE without @PIN that is a
local directory is pinned as a path.

The repository is fetched into the Podmin cache and proven to be its commit,
every .star file it adds is shown, and the lock is written only once you
accept: type y at the prompt, or pass --yes. --dry-run shows it and changes
nothing.`,
		Example: `  podmin recipes add platform https://example.com/platform-recipes.git@v1.4.0
  podmin recipes add shared ../shared-recipes --yes`,
		Args:        cobra.ExactArgs(2),
		Annotations: map[string]string{noContext: "true"},
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := pstar.ParseRecipeSource(args[1])
			if err != nil {
				return usageError{err}
			}
			u, err := pstar.PlanRecipeAdd(f.dir, env.Dirs.Cache, args[0], src)
			if errors.Is(err, pstar.ErrRecipeName) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			return reviewRecipeUpdate(cmd, env, f, u)
		},
	}
	f.bind(cmd)
	return cmd
}

func newRecipesUpdateCmd(env *builtins.Env) *cobra.Command {
	var f recipeReviewFlags
	var to string
	cmd := &cobra.Command{
		Use:   "update [NAME...]",
		Short: "Move shared recipe repositories to a new pin, after showing the diff",
		Long: `Update moves each named repository (all, without names) of podmin.star.lock
to a new pin: a git repository to the commit of --to, or else of the branch
or tag it follows, or else of the remote's HEAD; a local path to its content
now. The new commit is fetched and proven like a load, and the diff of every
.star file against the content pinned now is shown. The lock is rewritten
only once you accept: type y at the prompt, or pass --yes. Without a
confirmation, and with --dry-run, nothing changes.

A cached clone of either commit that is not exactly its commit (tampering or
corruption) is refused, as a load refuses it. A repository that cannot be
updated keeps its pin and is reported; the others are still updated.`,
		Example: `  podmin recipes update
  podmin recipes update platform --to v1.5.0
  podmin recipes update platform --dry-run`,
		Annotations: map[string]string{noContext: "true"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if to != "" && len(args) != 1 {
				return usageError{errors.New("--to moves one repository: name it, as in podmin recipes update NAME --to PIN")}
			}
			u, err := pstar.PlanRecipeUpdate(f.dir, env.Dirs.Cache, args, to)
			if err != nil {
				return err
			}
			if err := reviewRecipeUpdate(cmd, env, f, u); err != nil {
				return err
			}
			return u.Failed()
		},
	}
	f.bind(cmd)
	cmd.Flags().StringVar(&to, "to", "", "the commit, branch or tag to move the one named repository to")
	return cmd
}

// notAccepted is a change of pins the operator did not accept: refused
// like an unconfirmed command (exit 4), in words that fit a lock file.
type notAccepted string

func (e notAccepted) Error() string { return string(e) }
func (e notAccepted) Unwrap() error { return builtins.ErrNotConfirmed }

// reviewRecipeUpdate prints the planned change, asks for it, and writes it.
func reviewRecipeUpdate(cmd *cobra.Command, env *builtins.Env, f recipeReviewFlags, u *pstar.RecipeUpdate) error {
	w := cmd.OutOrStdout()
	printRecipeUpdate(w, u)
	if !u.Changed() {
		if u.Failed() == nil {
			fmt.Fprintf(w, "%s is unchanged\n", u.LockPath)
		}
		return nil
	}
	if f.dryRun {
		fmt.Fprintf(w, "dry run: %s was not changed\n", u.LockPath)
		return nil
	}
	if !f.yes {
		tty := terminal(env)
		if tty == nil {
			return notAccepted(fmt.Sprintf("the new pins were not accepted, so %s was not changed: standard input is not a terminal to accept them: review the diff above, then pass --yes (-y) to %s", u.LockPath, cmd.CommandPath()))
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Write these pins to %s? [y/N] ", u.LockPath)
		line, err := readLine(tty)
		if err != nil {
			return notAccepted(fmt.Sprintf("read the answer: %v; %s was not changed", err, u.LockPath))
		}
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			return notAccepted(fmt.Sprintf("the new pins were not accepted, so %s was not changed", u.LockPath))
		}
	}
	if err := u.Apply(); err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s\n", u.LockPath)
	return nil
}

// printRecipeUpdate renders each repository's change and its per-file
// diff, as a reviewer reads it before accepting.
func printRecipeUpdate(w io.Writer, u *pstar.RecipeUpdate) {
	for _, c := range u.Changes {
		if c.Err != nil {
			fmt.Fprintf(w, "@%s: not updated: %v\n", c.Name, c.Err)
			continue
		}
		fmt.Fprintf(w, "@%s: %s\n", c.Name, pinSummary(c))
		if !c.Changed() {
			continue
		}
		fmt.Fprintf(w, "  digest %s -> %s\n", pinOr(c.Before.Digest, "none"), c.After.Digest)
		hidden := false
		for _, fc := range c.Files {
			fmt.Fprintf(w, "  %-7s %s\n", fc.Status, fc.Path)
			hidden = hidden || fc.Diff == nil
		}
		if hidden && c.Note != "" {
			fmt.Fprintf(w, "  note: %s\n", c.Note)
		}
		for _, fc := range c.Files {
			if fc.Diff == nil {
				continue
			}
			from, to := "a/"+fc.Path, "b/"+fc.Path
			switch fc.Status {
			case "added":
				from = "/dev/null"
			case "removed":
				to = "/dev/null"
			}
			fmt.Fprintf(w, "--- %s\n+++ %s\n", from, to)
			for _, l := range fc.Diff {
				fmt.Fprintln(w, l)
			}
		}
	}
}

// pinSummary says where a repository's pin moves.
func pinSummary(c pstar.RecipeChange) string {
	a := c.After
	where := a.Path
	if a.Git != "" {
		where = a.Git + " " + a.Commit
		if a.Ref != "" {
			where += " (" + a.Ref + ")"
		}
	}
	n := fmt.Sprintf("%d file(s)", len(a.Files))
	switch {
	case c.New:
		return fmt.Sprintf("new: %s, %s", where, n)
	case !c.Changed():
		return fmt.Sprintf("unchanged: %s, %s", where, n)
	case c.Before.Git != "" && c.Before.Commit != a.Commit:
		return fmt.Sprintf("%s -> %s, %s", c.Before.Commit, where, n)
	}
	return fmt.Sprintf("content changed: %s, %s", where, n)
}

func pinOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
