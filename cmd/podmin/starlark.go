// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/chzyer/readline"
	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/paths"
	pstar "podmin.dev/podmin/starlark"
)

// starlarkCommands are run, test, repl and the "starlark" help topic.
func starlarkCommands(env *builtins.Env) []*cobra.Command {
	return []*cobra.Command{newRunCmd(env), newTestCmd(env), newReplCmd(env), newStarlarkTopic()}
}

// scriptEnv is env with its progress lines passed through the host's
// scrubber, so secret values never reach stderr either.
func scriptEnv(env *builtins.Env, stderr io.Writer) (*builtins.Env, func(*pstar.Host)) {
	e := *env
	var h *pstar.Host
	e.Progress = func(msg string) {
		if h != nil {
			msg = h.Scrub(msg)
		}
		fmt.Fprintln(stderr, msg)
	}
	return &e, func(host *pstar.Host) { h = host }
}

func newRunCmd(env *builtins.Env) *cobra.Command {
	var dryRun, yes bool
	var out string
	var maxSteps uint64
	cmd := &cobra.Command{
		Use:   "run FILE [-- ARGS...]",
		Short: "Run a Starlark recipe",
		Long: `Run executes the Starlark recipe FILE. When it defines main(ctx, **params),
arguments after "--" (--key=value) become main's keyword arguments, converted to
the type of each parameter's default; "-- --help" prints main's docstring and
parameters.

With --dry-run every read runs for real and every write (connect, use,
disconnect, init, deploy, delete) is recorded instead; the plan is printed at the
end (-o json for data). Destructive operations need confirm="<cluster>" in the
script or --yes.

Exit status: 0 success, 1 Podmin failed, 2 bad usage, 5 the script failed
(the error shows the Starlark backtrace with file:line). See "podmin help
starlark" for the language reference.`,
		Example: `  podmin run recipes/quickstart.star
  podmin run --dry-run recipes/rollout.star -- --image=hello:v2 --nodegroups=a --nodegroups=b`,
		Args:        cobra.MinimumNArgs(1),
		Annotations: map[string]string{noContext: "true"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			if dash := cmd.ArgsLenAtDash(); dash > 1 || dash == -1 && len(args) > 1 {
				return usageError{errors.New(`pass the script's arguments after "--": podmin run FILE -- --key=value`)}
			}
			e, bind := scriptEnv(env, cmd.ErrOrStderr())
			h := pstar.New(pstar.Options{Ops: e, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(), DryRun: dryRun, Yes: yes,
				MaxSteps: maxSteps, CacheDir: env.Dirs.Cache, WorkDir: env.WorkDir})
			bind(h)
			defer h.Close()
			err := h.Run(cmd.Context(), args[0], args[1:])
			var ae *pstar.ArgsError
			if errors.As(err, &ae) {
				return usageError{ae}
			}
			if err == nil && h.Plan() != nil {
				return h.Plan().Write(h.Stdout(), out)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&dryRun, "dry-run", false, "perform reads, record writes and print the plan instead of changing anything")
	f.BoolVar(&yes, "yes", false, "confirm every destructive operation of the script")
	f.Uint64Var(&maxSteps, "max-steps", pstar.DefaultMaxSteps, "stop the script after this many Starlark steps")
	cmd.Flags().StringVarP(&out, "output", "o", "table", "format of the dry-run plan: table or json")
	return cmd
}

func newTestCmd(env *builtins.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "test [PATH...]",
		Short: "Run the tests of Starlark recipes (*_test.star)",
		Long: `Test finds every *_test.star file below PATH (default ".") and runs each of its
test_*(t) functions against a fresh local provider (its own state directories and
bucket, connected as cluster "test") with a fixed clock. t.assert.eq/ne/true/contains,
t.fails(fn, "regexp") and t.run(main, **kwargs) are available.

It prints one line per test and "N passed, N failed"; it exits 5 when a test failed.`,
		Annotations: map[string]string{noContext: "true"},
		RunE: func(cmd *cobra.Command, args []string) error {
			sum, err := pstar.RunTests(cmd.Context(), pstar.TestOptions{Paths: args, Stdout: cmd.OutOrStdout(), CacheDir: env.Dirs.Cache})
			if err != nil {
				return err
			}
			return pstar.TestsFailed(sum)
		},
	}
}

func newReplCmd(env *builtins.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "repl [FILE]",
		Short: "Start an interactive Starlark session",
		Long: `Repl starts an interactive Starlark session with the podmin module, optionally
pre-loading FILE. Tab completes names and attributes, help(x) documents a builtin,
_ holds the last value, Ctrl-C cancels the running call, Ctrl-D leaves. History is
kept in the Podmin data directory. The session has no overall deadline unless
--timeout is given.`,
		Args:        cobra.MaximumNArgs(1),
		Annotations: map[string]string{noContext: "true", noDeadline: "true"},
		RunE: func(cmd *cobra.Command, args []string) error {
			e, bind := scriptEnv(env, cmd.ErrOrStderr())
			h := pstar.New(pstar.Options{Ops: e, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(), CacheDir: env.Dirs.Cache, WorkDir: env.WorkDir})
			bind(h)
			defer h.Close()
			// Ctrl-C cancels the running call, not the session: the session
			// outlives the root context's interrupt cancellation.
			ctx := context.WithoutCancel(cmd.Context())
			r := h.NewREPL()
			if len(args) == 1 {
				if err := r.Preload(ctx, args[0]); err != nil {
					return err
				}
			}
			if err := paths.EnsureDir(env.Dirs.Data); err != nil {
				return err
			}
			rl, err := readline.NewEx(&readline.Config{
				Prompt:       ">>> ",
				HistoryFile:  filepath.Join(env.Dirs.Data, "repl_history"),
				AutoComplete: r,
				Stdout:       cmd.OutOrStdout(),
				Stderr:       cmd.ErrOrStderr(),
			})
			if err != nil {
				return err
			}
			defer rl.Close()
			interrupts := make(chan os.Signal, 1)
			signal.Notify(interrupts, os.Interrupt)
			defer signal.Stop(interrupts)
			ch := make(chan struct{})
			go func() {
				for range interrupts {
					select {
					case ch <- struct{}{}:
					default:
					}
				}
			}()
			return r.Loop(ctx, rl, ch)
		},
	}
}

// newStarlarkTopic is "podmin help starlark": the generated reference.
func newStarlarkTopic() *cobra.Command {
	return &cobra.Command{
		Use:   "starlark",
		Short: "The Starlark recipe language: podmin module, run, test, repl",
		Long:  pstar.Markdown(),
	}
}
