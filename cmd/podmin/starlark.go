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
	"regexp"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
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
	line := env.Progress // shares the lines or bars of push, pull and build
	if line == nil {
		line = func(msg string) { fmt.Fprintln(stderr, msg) }
	}
	e.Progress = func(msg string) {
		if h != nil {
			msg = h.Scrub(msg)
		}
		line(msg)
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
parameters. A parameter whose default is podmin.secret_param() takes a secret:
its value reaches main and ctx.args only as a secret, printed as <secret NAME>.

With --dry-run the recipe runs the same operations over recording boundaries:
every read is real, every write (the cluster bucket, secrets, the contexts file,
local files, the local image store) lands in an in-memory overlay that later
reads see, and nothing real is modified. The plan printed at the end lists, per
call, each changed object, secret, context and file with a diff. With -o json
standard output carries only the plan; the script's print() goes to standard
error. -o formats only that plan: a real run refuses -o json and -o yaml. Destructive operations need confirm = True or confirm = "<cluster>" in the
script, or --yes (-y) for the whole run; confirm = naming another cluster refuses
the call even with --yes. A dry run needs none: its plan marks each destructive
call.

Exit status: 0 success, 2 bad usage, 3 FILE does not exist, 4 a destructive
operation was not confirmed or was refused, 5 the script failed (the error shows
the Starlark backtrace with file:line), 124 a deadline passed. A built-in's
error keeps its command's status: 1 the operation failed, 2 a bad value (as the
same value given to the command's flag), 3 what it asked for does not exist, 6
the outcome of a write is unknown. A repository pinned in podmin.star.lock that
cannot be fetched exits 1. See "podmin help starlark" for the language
reference.`,
		Example: `  podmin run recipes/quickstart.star
  podmin run --dry-run recipes/rollout.star -- --image=hello:v2 --nodegroups=a --nodegroups=b
  podmin run rotate.star -- --token="$API_TOKEN"   # def main(ctx, token = podmin.secret_param())`,
		Args:        cobra.MinimumNArgs(1),
		Annotations: map[string]string{noContext: "true"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(out); err != nil {
				return err
			}
			// Only a plan has a format: a real run prints what the script
			// prints, so an output format would be silently ignored.
			if out != "table" && !dryRun {
				return usageError{fmt.Errorf("-o %s formats the plan of a dry run, and a real run has none: add --dry-run, or leave -o out", out)}
			}
			lessGC()
			if dash := cmd.ArgsLenAtDash(); dash > 1 || dash == -1 && len(args) > 1 {
				return usageError{errors.New(`pass the script's arguments after "--": podmin run FILE -- --key=value`)}
			}
			recipe := args[0]
			if !filepath.IsAbs(recipe) && env.WorkDir != "" {
				recipe = filepath.Join(env.WorkDir, recipe)
			}
			if st, err := os.Stat(recipe); err == nil && st.IsDir() {
				return usageError{fmt.Errorf("%s is a directory: pass a recipe file such as %s", args[0], filepath.Join(args[0], "main.star"))}
			}
			e, bind := scriptEnv(env, cmd.ErrOrStderr())
			// A JSON plan owns standard output: the script prints to stderr.
			scriptOut := cmd.OutOrStdout()
			if dryRun && out != "table" {
				scriptOut = cmd.ErrOrStderr()
			}
			h := pstar.New(pstar.Options{Ops: e, Stdout: scriptOut, Stderr: cmd.ErrOrStderr(), DryRun: dryRun, Yes: yes,
				MaxSteps: maxSteps, CacheDir: env.Dirs.Cache, WorkDir: env.WorkDir})
			bind(h)
			defer h.Close()
			err := h.Run(cmd.Context(), args[0], args[1:])
			var ae *pstar.ArgsError
			if errors.As(err, &ae) {
				return usageError{ae}
			}
			if err == nil && h.Plan() != nil {
				var buf strings.Builder
				if err := writePlan(&buf, h.Plan(), out); err != nil {
					return err
				}
				_, err = io.WriteString(cmd.OutOrStdout(), h.Scrub(buf.String()))
				return err
			}
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&dryRun, "dry-run", false, "perform reads, record writes and print the plan instead of changing anything")
	f.BoolVarP(&yes, "yes", "y", false, "confirm every destructive operation of the script")
	f.Uint64Var(&maxSteps, "max-steps", pstar.DefaultMaxSteps, "stop the script after this many Starlark steps")
	addOutputFlag(cmd, &out)
	return cmd
}

func newTestCmd(env *builtins.Env) *cobra.Command {
	var runPattern string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "test [-run REGEX] [-v] [PATH...]",
		Short: "Run the tests of Starlark recipes (*_test.star)",
		Long: `Test finds every *_test.star file below PATH (default ".") and runs each of its
test_*(t) functions in a sandbox of its own: a fresh local bucket connected as
cluster "test", its own contexts, its own local secrets store and a scratch
working directory that every file the test writes resolves into (also absolute
paths), with a fixed clock. Network access fails with a clear error; a test that
needs images starts t.fake_registry() and pulls from it.

t.assert.eq/ne/true/contains, t.fails(fn, "regexp"), t.run(main, **kwargs) and
t.fake_registry() are available.

Reads are jailed like writes: a test reads its sandbox and its own directory (a
relative path finds the fixtures next to the test), and a local bucket it
connects to by absolute path is mapped into the sandbox.

It prints one line per test and "N passed, N failed"; a failing test's output
is printed under it, a passing test's only with -v. It exits 5 when a test
failed, 3 when a PATH does not exist or no test matches -run.`,
		Example: `  podmin test recipes/
  podmin test -run 'twice$' -v recipes/quickstart_test.star`,
		Annotations: map[string]string{noContext: "true"},
		// Go's spelling (-run, -v) is parsed here, beside --run and --verbose.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths, help, err := parseTestArgs(args, &runPattern, &verbose)
			if err != nil {
				return usageError{err}
			}
			if help {
				return cmd.Help()
			}
			opts := pstar.TestOptions{Paths: paths, Stdout: cmd.OutOrStdout(), CacheDir: env.Dirs.Cache, Verbose: verbose}
			if runPattern != "" {
				if opts.Run, err = regexp.Compile(runPattern); err != nil {
					return usageError{fmt.Errorf("-run: %w", err)}
				}
			}
			sum, err := pstar.RunTests(cmd.Context(), opts)
			if err != nil {
				return err
			}
			return pstar.TestsFailed(sum)
		},
	}
	cmd.Flags().StringVar(&runPattern, "run", "", "run only the test functions whose name matches this regular expression (also -run)")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print the output of passing tests too")
	return cmd
}

// parseTestArgs reads test's flags in Go's and in GNU spelling.
func parseTestArgs(args []string, run *string, verbose *bool) (paths []string, help bool, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(paths, args[i+1:]...), false, nil
		case a == "-h" || a == "--help":
			return nil, true, nil
		case a == "-v" || a == "--verbose" || a == "-v=true" || a == "--verbose=true":
			*verbose = true
		case a == "-run" || a == "--run":
			if i+1 >= len(args) {
				return nil, false, fmt.Errorf("%s needs a regular expression", a)
			}
			*run = args[i+1]
			i++
		case strings.HasPrefix(a, "-run=") || strings.HasPrefix(a, "--run="):
			*run = a[strings.Index(a, "=")+1:]
		case strings.HasPrefix(a, "-") && a != "-":
			return nil, false, fmt.Errorf("unknown flag %s: test takes -run REGEX and -v", a)
		default:
			paths = append(paths, a)
		}
	}
	return paths, false, nil
}

func newReplCmd(env *builtins.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "repl [FILE]",
		Short: "Start an interactive Starlark session",
		Long: `Repl starts an interactive Starlark session with the podmin module, optionally
pre-loading FILE. Tab completes names and attributes, help(x) documents a builtin,
_ holds the last value, Ctrl-C cancels the running call, Ctrl-D leaves. History is
kept in the Podmin data directory (repl_history, mode 0600); it never keeps a line
that contains a secret value. On a terminal, a destructive call without confirm =
asks you to type the cluster ID before it runs, as the CLI commands do; Tab twice
lists the candidates. The session has no overall deadline unless --timeout is
given.`,
		Example: `  podmin repl
  podmin repl recipes/rollout.star`,
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
			rl, err := newReplReader(env, h, r, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer rl.Close()
			interrupts := make(chan os.Signal, 1)
			signal.Notify(interrupts, os.Interrupt)
			defer signal.Stop(interrupts)
			// Buffered: a Ctrl-C that comes before the running call's
			// listener is ready waits for it instead of being lost (the
			// REPL drops one left from before a statement).
			ch := make(chan struct{}, 1)
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
		Long:  pstar.Text(),
		Example: `  podmin help starlark
  podmin help starlark | less`,
	}
}

// lessGC makes the garbage collector start later in a recipe run: a run
// is short, allocates freely while it renders and parses manifests, and
// keeps little, so the collector's default 100% growth target had it
// collecting several times for memory about to be returned on exit. An
// explicit GOGC setting wins.
func lessGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(400)
	}
}
