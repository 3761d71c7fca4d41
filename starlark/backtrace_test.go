// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCollapseRepeats(t *testing.T) {
	for _, tc := range []struct {
		in, want []string
	}{
		{[]string{"a", "b", "c"}, []string{"a", "b", "c"}},
		{[]string{"a", "b", "b"}, []string{"a", "b", "b"}}, // two in a row stay
		{[]string{"a", "b", "b", "b", "b", "c"}, []string{"a", "b", "  [the previous line repeated 3 more times]", "c"}},
		{[]string{"x", "f", "g", "f", "g", "f", "g", "y"}, []string{"x", "f", "g", "  [the previous 2 lines repeated 2 more times]", "y"}},
	} {
		if got := collapseRepeats(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("collapseRepeats(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestDeepRecursionBacktrace: runaway recursion, direct or mutual, ends
// with a backtrace of a handful of lines, not one per frame.
func TestDeepRecursionBacktrace(t *testing.T) {
	e := newEnv(t)
	for name, script := range map[string]string{
		"direct": "def f(n):\n    return f(n + 1)\nf(0)\n",
		"mutual": "def f(n):\n    return g(n + 1)\ndef g(n):\n    return f(n + 1)\nf(0)\n",
	} {
		_, err := e.run(Options{}, script)
		if err == nil {
			t.Fatalf("%s: the recursion did not fail", name)
		}
		msg := (&ScriptError{Err: err}).Error()
		if n := strings.Count(msg, "\n"); n > 12 || !strings.Contains(msg, "more times]") || !strings.Contains(msg, "error: ") {
			t.Errorf("%s: %d lines:\n%.2000s", name, n, msg)
		}
		if strings.Contains(msg, "Error") {
			t.Errorf("%s: an upper-case error prefix:\n%s", name, msg)
		}
	}
}

// TestBacktraceFromTheRootDirectory: run from "/", a recipe's frames name
// its real absolute path, not that path without its leading "/". The
// working directory belongs to the process, so the recipe runs in a child
// process started in "/".
func TestBacktraceFromTheRootDirectory(t *testing.T) {
	if os.Getenv("PODMIN_BACKTRACE_CHILD") != "" {
		e := newEnv(t)
		file := e.write("lib.star", "def f():\n    fail(\"boom\")\n")
		main := e.write("main.star", "load(\"./lib.star\", \"f\")\nf()\n")
		err := e.host(Options{}).Run(context.Background(), main, nil)
		fmt.Printf("MAIN=%s\nLIB=%s\n%s\n", main, file, (&ScriptError{Err: err}).Error())
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBacktraceFromTheRootDirectory$", "-test.v")
	cmd.Dir = string(filepath.Separator)
	cmd.Env = append(os.Environ(), "PODMIN_BACKTRACE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var main, lib string
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "MAIN="); ok {
			main = v
		}
		if v, ok := strings.CutPrefix(l, "LIB="); ok {
			lib = v
		}
	}
	if !filepath.IsAbs(main) || !filepath.IsAbs(lib) {
		t.Fatalf("child output:\n%s", out)
	}
	for _, want := range []string{"  " + main + ":2:2: in <toplevel>", "  " + lib + ":2:9: in f"} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("the backtrace lacks %q:\n%s", want, out)
		}
	}
}

func TestDisplayName(t *testing.T) {
	for _, tc := range []struct{ wd, abs, want string }{
		{"/", "/tmp/r/main.star", "/tmp/r/main.star"},
		{"/home/op", "/home/op/r/main.star", "r/main.star"},
		{"/home/op", "/srv/r/main.star", "/srv/r/main.star"},
		{"/home/op", "/home/op/..hidden.star", "..hidden.star"},
	} {
		if got := displayName(tc.wd, tc.abs); got != tc.want {
			t.Errorf("displayName(%q, %q) = %q, want %q", tc.wd, tc.abs, got, tc.want)
		}
	}
}
