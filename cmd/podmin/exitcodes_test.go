// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/state"
)

// runnableCommands lists the command paths of the tree that do something.
func runnableCommands() []*cobra.Command {
	var out []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && !c.Hidden {
			out = append(out, c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(&builtins.Env{}))
	return out
}

// args splits a command path into the arguments that call it.
func pathArgs(c *cobra.Command) []string {
	return strings.Fields(strings.TrimPrefix(c.CommandPath(), "podmin"))
}

// TestUsageErrorsComeFirst calls every command with an unknown flag and,
// where it has -o, an unknown format, in a home without any context: the
// usage error must win (exit 2) and end with the subcommand's help.
func TestUsageErrorsComeFirst(t *testing.T) {
	c := newCLI(t)
	for _, cmd := range runnableCommands() {
		path := cmd.CommandPath()
		calls := [][]string{append(pathArgs(cmd), "--no-such-flag")}
		if cmd.Flags().Lookup("output") != nil {
			calls = append(calls, append(pathArgs(cmd), "-o", "xml"))
		}
		for _, args := range calls {
			_, errs, code := c.run(args...)
			if code != exitUsage || !strings.HasSuffix(errs, `run "`+path+` --help"`+"\n") {
				t.Errorf("podmin %s: exit %d, want 2 ending with the help of %q:\n%s", strings.Join(args, " "), code, path, errs)
			}
			if strings.Contains(errs, "context") {
				t.Errorf("podmin %s reached the context check:\n%s", strings.Join(args, " "), errs)
			}
		}
	}
}

// TestDeadlineExitCode checks 124 for an operation whose deadline passed.
func TestDeadlineExitCode(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	loop := c.script("loop.star", "def main(ctx):\n    while True:\n        pass\n")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"run", loop}, strings.NewReader(""), &out, &errb, func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
	if code != exitDeadline {
		t.Fatalf("exit %d, want 124:\n%s", code, errb.String())
	}
}

// TestUnknownOutcomeOutranksTheDeadline checks 6, not 124, for a write
// whose reply was lost when the deadline also passed: the deadline is why
// the write could not be confirmed, and what the operator must act on is
// that it may have been applied.
func TestUnknownOutcomeOutranksTheDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	cmd := &cobra.Command{Use: "deploy"}
	cmd.SetContext(ctx)
	lost := fmt.Errorf("deploy \"workers/web\": %w: write deployments/index.json: %w", state.ErrOutcomeUnknown, context.DeadlineExceeded)
	if code := exitCode(cmd, lost); code != exitUnknown {
		t.Fatalf("exit %d for %v, want %d", code, lost, exitUnknown)
	}
	if code := exitCode(cmd, fmt.Errorf("read deployments/index.json: %w", context.DeadlineExceeded)); code != exitDeadline {
		t.Fatalf("exit %d for a plain deadline, want %d", code, exitDeadline)
	}
}
