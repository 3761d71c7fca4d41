// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// TestREPLInterruptsInPseudoTerminal: on a terminal, Ctrl-C while typing
// discards the input and Ctrl-C while a call runs cancels the call; the
// session goes on after both, and Ctrl-D still ends it.
func TestREPLInterruptsInPseudoTerminal(t *testing.T) {
	dir := t.TempDir()
	r := startREPL(t, dir, "xterm", &pty.Winsize{Rows: 24, Cols: 100})
	r.out.waitFor(t, ">>> ")
	r.send(t, "half = \x03")
	r.out.waitForAfter(t, "half = ", ">>> ")
	// Each step of the loop costs far more than a step, so only the
	// interrupt ends it, never the step limit.
	r.send(t, "def spin():\r")
	r.out.waitFor(t, "... ")
	r.send(t, "    print(\"spin\" + \"ning\")\r    s = \"a\" * 1000000\r    while True:\r        s.count(\"b\")\r\r")
	r.out.waitForAfter(t, "s.count", ">>> ")
	r.send(t, "spin()\r")
	r.out.waitForAfter(t, "spin()", "spinning")
	r.interrupt(t, "\x03")
	r.out.waitForAfter(t, "spinning", "interrupted")
	r.out.waitForAfter(t, "interrupted", ">>> ")
	r.send(t, "40 + 2\r")
	r.out.waitForAfter(t, "40 + 2", "42")
	r.out.waitForAfter(t, "42", ">>> ")
	r.quit(t)
	if out := r.output(); strings.Contains(out, "half = 40") || strings.Contains(out, "step limit") {
		t.Errorf("the discarded input or the spin outlived Ctrl-C:\n%q", out)
	}
}

// TestREPLHistoryInPseudoTerminal: the editor offers the lines of earlier
// sessions, and the lines of this one, to the up arrow.
func TestREPLHistoryInPseudoTerminal(t *testing.T) {
	dir := t.TempDir()
	hist := filepath.Join(dir, "data", "podmin", replHistoryFile)
	if err := os.MkdirAll(filepath.Dir(hist), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hist, []byte("40 + 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startREPL(t, dir, "xterm", &pty.Winsize{Rows: 24, Cols: 100})
	r.out.waitFor(t, ">>> ")
	r.send(t, "\x1b[A\r")
	r.out.waitForAfter(t, "40 + 2", "42")
	r.out.waitForAfter(t, "42", ">>> ")
	r.send(t, "6 * 7 + 1\r")
	r.out.waitFor(t, "43")
	r.out.waitForAfter(t, "43", ">>> ")
	r.send(t, "\x1b[A\x1b[A\r")
	r.out.waitForAfter(t, "43", "42")
	r.send(t, "'end'\r")
	r.out.waitForAfter(t, `"end"`, ">>> ")
	r.quit(t)
}
