// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Command podmin is the operator's CLI: it writes a cluster's desired state
// into its object-storage bucket. Every command is a thin layer over the
// builtins package, which the Starlark host uses too.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/paths"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.LookupEnv)
	stop()
	os.Exit(code)
}

// run executes one invocation and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) int {
	home, _ := os.UserHomeDir()
	getenv := func(k string) string { v, _ := lookupEnv(k); return v }
	dirs, err := paths.Resolve(paths.Env{GOOS: runtime.GOOS, Home: home, Getenv: getenv})
	if err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	env := &builtins.Env{
		Dirs:      dirs,
		Providers: providers(dirs),
		Progress:  func(msg string) { fmt.Fprintln(stderr, msg) },
		LookupEnv: lookupEnv,
		Stdin:     stdin,
		Secrets:   secretStores(dirs),
	}
	return execute(ctx, newRoot(env), args, stdout, stderr)
}
