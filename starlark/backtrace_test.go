// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
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
