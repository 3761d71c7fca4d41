// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/builtins/deps"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/state"
	pstar "podmin.dev/podmin/starlark"
)

// The exit-code contract, the same for every command (README, "Exit
// status"). Scripts branch on these numbers, so they never change meaning.
const (
	exitOK       = 0   // success
	exitFailed   = 1   // the operation failed
	exitUsage    = 2   // bad usage, found before any context or network access
	exitNotFound = 3   // the one thing the command asks for does not exist
	exitRefused  = 4   // refused for safety: not confirmed, not owned, another cluster's
	exitScript   = 5   // a recipe's own failure: fail(), an error inside main
	exitUnknown  = 6   // the outcome of a write is unknown (its reply was lost)
	exitDeadline = 124 // a deadline passed (as timeout(1) reports it)
	// exitSignal + N: the command was interrupted by signal N (130 for
	// SIGINT, 143 for SIGTERM), as shells report it.
	exitSignal = 128
)

// usageError marks errors in how a command was called (exit code 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// notFoundError marks the absence of the one thing a command was asked
// for, such as the deployment "podmin delete" names (exit code 3).
type notFoundError struct{ err error }

func (n notFoundError) Error() string { return n.err.Error() }
func (n notFoundError) Unwrap() error { return n.err }

// subjectNotFound lists, per command path prefix, the sentinel errors that
// mean the command's subject does not exist. Elsewhere the same sentinel
// is an ordinary failure: a missing secret while deploying is not "the
// deployment was not found".
var subjectNotFound = []struct {
	prefix string
	errs   []error
}{
	{"podmin use", []error{contexts.ErrUnknown}},
	{"podmin disconnect", []error{contexts.ErrUnknown}},
	{"podmin secret", []error{secrets.ErrNotFound}},
	{"podmin run", []error{fs.ErrNotExist}},
	{"podmin test", []error{fs.ErrNotExist, pstar.ErrNoTests}},
	{"podmin repl", []error{fs.ErrNotExist}},
	{"podmin validate", []error{fs.ErrNotExist}},
}

// refusedFor lists, per command path prefix, sentinel errors that refuse
// the command for safety. A missing deployments index refuses the
// commands that would write a new one (exit 4); a command that only reads
// it fails (exit 1).
var refusedFor = []struct {
	prefix string
	errs   []error
}{
	{"podmin deploy", []error{state.ErrIndexMissing}},
	{"podmin delete", []error{state.ErrIndexMissing}},
	{"podmin install", []error{state.ErrIndexMissing}},
	{"podmin uninstall", []error{state.ErrIndexMissing}},
	{"podmin rollback", []error{state.ErrIndexMissing}},
}

// notFoundAnywhere are sentinel errors that mean the one thing asked for
// does not exist wherever they surface: a deployment status or a wait
// names is not committed (a wait whose deployment is deleted while it
// waits is superseded instead), a rollback's revision is not recorded.
var notFoundAnywhere = []error{pstar.ErrNotFound, builtins.ErrNoDeployment, builtins.ErrNoRevision}

// invalidArguments are the sentinel errors of a value given to an
// operation that breaks its rules, found before anything is read or
// written: bad usage (exit 2) whether a flag or a recipe gave the value.
var invalidArguments = []error{builtins.ErrInvalidArgument, builtins.ErrInvalidSetup, deps.ErrUnknownArch}

// refusals are the sentinel errors of operations refused for safety.
var refusals = []error{builtins.ErrNotConfirmed, builtins.ErrForeignBucket, builtins.ErrNotOwned, builtins.ErrNotInstalled, builtins.ErrWouldReplace, builtins.ErrDeployChecks}

// cobraUsagePrefixes are the messages Cobra returns for bad usage without
// passing them through the flag error function.
var cobraUsagePrefixes = []string{
	"unknown command", "accepts ", "requires ", "unknown flag", "unknown shorthand flag",
	"invalid argument", "flag needs an argument", "required flag(s)", "if any flags in the group",
}

// exitCode maps the error of the command cmd to its exit status.
func exitCode(cmd *cobra.Command, err error) int {
	if err == nil {
		return exitOK
	}
	var u usageError
	if errors.As(err, &u) {
		return exitUsage
	}
	for _, p := range cobraUsagePrefixes {
		if strings.HasPrefix(err.Error(), p) {
			return exitUsage
		}
	}
	var sig signalError
	if cmd.Context() != nil && errors.As(context.Cause(cmd.Context()), &sig) {
		return exitSignal + int(sig.sig)
	}
	// A write whose outcome is unknown outranks the deadline that cut its
	// confirmation short: the operator must look before repeating it.
	if errors.Is(err, state.ErrOutcomeUnknown) {
		return exitUnknown
	}
	// A deadline that passed explains the failure however it surfaced
	// (a Starlark cancellation does not wrap the context's error).
	if errors.Is(err, context.DeadlineExceeded) || cmd.Context() != nil && errors.Is(context.Cause(cmd.Context()), context.DeadlineExceeded) {
		return exitDeadline
	}
	var se *pstar.ScriptError
	if errors.As(err, &se) {
		// A built-in's error keeps the status of its command; everything
		// else that goes wrong in a script is the script's failure.
		var be *pstar.BuiltinError
		if errors.As(err, &be) {
			path := "podmin"
			if be.Command != "" {
				path += " " + be.Command
			}
			return operationCode(path, be.Err)
		}
		if isRefusal(err) {
			return exitRefused
		}
		// A pinned repository that cannot be fetched is an operation
		// that failed (git, the network), not the script's mistake.
		if errors.Is(err, pstar.ErrFetchRepository) {
			return exitFailed
		}
		return exitScript
	}
	return operationCode(cmd.CommandPath(), err)
}

// operationCode is the status of an operation's error for the command at
// path: refused, outcome unknown, not found, or failed.
func operationCode(path string, err error) int {
	if isRefusal(err) {
		return exitRefused
	}
	if errors.Is(err, state.ErrOutcomeUnknown) {
		return exitUnknown
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return exitDeadline
	}
	for _, e := range invalidArguments {
		if errors.Is(err, e) {
			return exitUsage
		}
	}
	if matchesFor(refusedFor, path, err) {
		return exitRefused
	}
	var nf notFoundError
	if errors.As(err, &nf) {
		return exitNotFound
	}
	for _, e := range notFoundAnywhere {
		if errors.Is(err, e) {
			return exitNotFound
		}
	}
	if matchesFor(subjectNotFound, path, err) {
		return exitNotFound
	}
	return exitFailed
}

// matchesFor reports whether err is one of the sentinels table lists for
// the command at path (or a command it is the parent of).
func matchesFor(table []struct {
	prefix string
	errs   []error
}, path string, err error) bool {
	for _, s := range table {
		if path != s.prefix && !strings.HasPrefix(path, s.prefix+" ") {
			continue
		}
		for _, e := range s.errs {
			if errors.Is(err, e) {
				return true
			}
		}
	}
	return false
}

func isRefusal(err error) bool {
	for _, r := range refusals {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// report prints err for cmd and returns the exit status. A usage error
// ends with the help command of the subcommand that was called.
func report(stderr io.Writer, cmd *cobra.Command, err error) int {
	code := exitCode(cmd, err)
	var se *pstar.ScriptError
	var be *pstar.BuiltinError
	switch {
	case errors.As(err, &se) && code == exitScript:
		fmt.Fprintln(stderr, "error: the script failed:", se.Error())
	case errors.As(err, &se) && code == exitDeadline:
		fmt.Fprintln(stderr, "error: the script did not finish within --timeout (raise --timeout if it needs longer):", se.Error())
	case errors.As(err, &se) && errors.As(err, &be):
		// A built-in failed inside the script: its backtrace says where.
		fmt.Fprintln(stderr, "error: a Podmin operation in the script failed:", se.Error())
	case errors.As(err, &se):
		fmt.Fprintln(stderr, "error: the script stopped:", se.Error())
	default:
		fmt.Fprintln(stderr, "error:", err)
	}
	if code == exitUsage {
		fmt.Fprintf(stderr, "run %q\n", usageHelp(cmd, err))
	}
	return code
}

// usageHelp is the help command a usage error points to: the called
// command's, or, for a built-in a recipe called with a bad value, the
// help of the command it mirrors (its keywords are that command's flags),
// or the Starlark reference for one without a command.
func usageHelp(cmd *cobra.Command, err error) string {
	var be *pstar.BuiltinError
	switch {
	case !errors.As(err, &be):
		return cmd.CommandPath() + " --help"
	case be.Command != "":
		return "podmin " + be.Command + " --help"
	}
	return "podmin help starlark"
}

// argsAreUsage makes every command's positional-argument check a usage
// error, so a wrong number of arguments exits 2 like a bad flag does.
func argsAreUsage(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		argsAreUsage(sub)
	}
}

// usageFirst runs the usage checks Cobra would run only after the
// persistent pre-run hooks (required flags, flag groups), so that a usage
// error wins over a missing context.
func usageFirst(cmd *cobra.Command) error {
	if err := cmd.ValidateRequiredFlags(); err != nil {
		return usageError{err}
	}
	if err := cmd.ValidateFlagGroups(); err != nil {
		return usageError{err}
	}
	return nil
}
