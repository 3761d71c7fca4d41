// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/internal/scrub"
)

// ScriptError is a failure of the script itself: a syntax error, a failed
// builtin, fail(), a failed test. Its message is the Starlark backtrace and
// the root cause, each frame with file:line. The CLI exits 5 on it.
type ScriptError struct {
	Err error
}

func (e *ScriptError) Error() string {
	// The backtrace is rendered here, outside any scrubbing wrapper of
	// e.Err, so it is scrubbed here too.
	reg := scrub.RegistryOf(e.Err)
	if reg == nil {
		reg = scrub.Process()
	}
	var ev *star.EvalError
	if errors.As(e.Err, &ev) {
		return reg.String(backtrace(ev))
	}
	return reg.String(e.Err.Error())
}

func (e *ScriptError) Unwrap() error { return e.Err }

// ErrFetchRepository reports a recipe repository pinned to a git commit
// that could not be fetched: git could not clone it, or the commit is not
// in it. The operation failed, not the script: the CLI exits 1 on it.
var ErrFetchRepository = errors.New("the pinned repository could not be fetched")

// fetchFailed marks an error as ErrFetchRepository, keeping its message.
type fetchFailed struct{ err error }

func (e fetchFailed) Error() string   { return e.err.Error() }
func (e fetchFailed) Unwrap() []error { return []error{e.err, ErrFetchRepository} }

// ArgsError is a bad command-line argument for main(); the CLI treats it
// as bad usage (exit 2).
type ArgsError struct {
	Err error
}

func (e *ArgsError) Error() string { return e.Err.Error() }
func (e *ArgsError) Unwrap() error { return e.Err }

// Run executes file and, when it defines main(ctx, ...), calls main with
// args parsed as --key=value keyword arguments. "--help" among args prints
// main's docstring and parameters instead.
func (h *Host) Run(ctx context.Context, file string, args []string) error {
	if h.err != nil {
		return h.err
	}
	if _, err := os.Stat(file); err != nil {
		// Podmin cannot start it: not a script failure.
		return fmt.Errorf("recipe %s cannot be read: %w", file, err)
	}
	thread, release := h.NewThread(ctx, "main")
	defer release()
	globals, err := h.ExecFile(thread, file)
	if err != nil {
		return &ScriptError{h.scrub.Error(err)}
	}
	mainv, ok := globals["main"]
	if !ok {
		if len(args) > 0 {
			return &ArgsError{fmt.Errorf("%s defines no main(ctx, ...), so it takes no arguments (got %s)", file, scrub.Quote(strings.Join(args, " ")))}
		}
		return nil
	}
	fn, ok := mainv.(*star.Function)
	if !ok || fn.NumParams() == 0 {
		return &ScriptError{h.scrub.Error(fmt.Errorf("%s: main must be a function main(ctx, **params)", file))}
	}
	params := mainParams(fn)
	for _, a := range args {
		if a == "--help" || a == "-h" {
			_, err := fmt.Fprint(h.stdout, mainHelp(file, fn, params))
			return err
		}
	}
	kwargs, err := parseArgs(h.scrub, params, fn.HasKwargs(), args)
	if err != nil {
		return &ArgsError{h.scrub.Error(fmt.Errorf("%s: %w (run with -- --help for the parameters)", file, err))}
	}
	ctxv, err := h.runContext(kwargs)
	if err != nil {
		return err
	}
	v, err := star.Call(thread, fn, star.Tuple{ctxv}, kwargs)
	if err != nil {
		return &ScriptError{h.scrub.Error(err)}
	}
	if v != star.None {
		fmt.Fprintln(h.stdout, v)
	}
	return nil
}

// RunContext returns the ctx value passed to main: ctx.args (the keyword
// arguments), ctx.context (the current context, or None) and ctx.dry_run.
func (h *Host) runContext(kwargs []star.Tuple) (star.Value, error) {
	args := star.NewDict(len(kwargs))
	for _, kv := range kwargs {
		if err := args.SetKey(kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	args.Freeze()
	var cur star.Value = star.None
	if c, err := h.ops.CurrentContext(); err == nil {
		cur = result("context", str("cluster", c.Cluster), str("provider", c.Provider), str("region", c.Region), str("bucket", c.Bucket))
	}
	return result("run_context", value("args", args), value("context", cur), boolean("dry_run", h.planned())), nil
}
