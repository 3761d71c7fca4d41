// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/scrub"
)

func main() {
	tuneGC(os.LookupEnv)
	ctx, stop := notifySignals(context.Background())
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}

// cliGCPercent is the garbage collector's target for the CLI: the heap may
// grow to five times the live data between collections, instead of twice.
// A command lives for a fraction of a second and holds a few MB (a deploy
// into a 10,000-entry index about 15 MB), so the extra memory is small,
// and the collections it saves are 6-8% of a deploy's wall time on a
// 2-core machine (measured alternating fresh processes against a
// local S3 server: 3 ms of 36 ms at 10 entries, 5-6 ms of 85 ms at
// 10,000).
const cliGCPercent = 400

// tuneGC sets cliGCPercent unless the operator chose a target with GOGC
// or a memory limit with GOMEMLIMIT, which keep their meaning.
func tuneGC(lookupEnv func(string) (string, bool)) {
	_, gogc := lookupEnv("GOGC")
	_, limit := lookupEnv("GOMEMLIMIT")
	if !gogc && !limit {
		debug.SetGCPercent(cliGCPercent)
	}
}

// handledSignals end a command: it is cancelled, reports what it had done,
// and exits 128 + the signal's number (130 for SIGINT, 143 for SIGTERM).
var handledSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// signalError is the cause of a command's context cancelled by a signal.
type signalError struct{ sig syscall.Signal }

func (e signalError) Error() string {
	name := map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP", syscall.SIGQUIT: "SIGQUIT"}[e.sig]
	if name == "" {
		name = e.sig.String()
	}
	return fmt.Sprintf("interrupted by %s: the command stopped where it was; anything it reported as done stays done", name)
}

// notifySignals returns a context cancelled, with a signalError as its
// cause, by the first of handledSignals the process receives.
func notifySignals(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, handledSignals...)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			if n, ok := s.(syscall.Signal); ok {
				cancel(signalError{sig: n})
			}
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// run executes one invocation and returns the process exit code. Every
// byte it writes passes the process's scrubber, which every secret value
// is registered with as it enters (see internal/scrub).
func run(ctx context.Context, args []string, stdin io.Reader, rawStdout, rawStderr io.Writer, lookupEnv func(string) (string, bool)) (code int) {
	return runWith(ctx, args, stdin, rawStdout, rawStderr, lookupEnv, nil)
}

// runWith is run with adjust, when set, changing the operations' Env
// before the command runs (tests point Transport at a fake upstream).
func runWith(ctx context.Context, args []string, stdin io.Reader, rawStdout, rawStderr io.Writer, lookupEnv func(string) (string, bool), adjust func(*builtins.Env)) (code int) {
	reg := scrub.Process()
	stdout, stderr := scrub.NewWriter(reg, rawStdout), scrub.NewWriter(reg, rawStderr)
	defer func() {
		// A panic is a Podmin bug; its message and stack are scrubbed
		// like everything else before they are printed.
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "podmin: internal error (please report it): %v\n%s", r, debug.Stack())
			code = 70
		}
		_ = stdout.Flush()
		_ = stderr.Flush()
	}()
	home, _ := os.UserHomeDir()
	getenv := func(k string) string { v, _ := lookupEnv(k); return v }
	dirs, err := paths.Resolve(paths.Env{GOOS: runtime.GOOS, Home: home, Getenv: getenv})
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	transfers, progressLine := transferSink(rawStderr, stderr)
	env := &builtins.Env{
		Dirs:      dirs,
		Providers: providers(dirs),
		Progress:  progressLine,
		Transfers: transfers,
		LookupEnv: lookupEnv,
		Stdin:     stdin,
		Secrets:   secretStores(dirs),
		Scrub:     reg,
	}
	env.Infrastructure = clusterInfrastructure(stderr, lookupEnv)
	if adjust != nil {
		adjust(env)
	}
	return execute(withTerminal(ctx, rawStdout), newRoot(env), args, stdout, stderr)
}
