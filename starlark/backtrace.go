// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"fmt"
	"strings"

	star "go.starlark.net/starlark"
)

// maxRepeatPeriod is the longest cycle of frames backtrace collapses (a
// function calling itself is 1, two calling each other 2).
const maxRepeatPeriod = 8

// backtrace renders a Starlark error as Podmin prints it: the call stack,
// most recent call last, with every run of repeated frames (runaway
// recursion) collapsed into one copy and a count, then the error. Errors
// are lower-case "error", like every other error Podmin prints.
func backtrace(ev *star.EvalError) string {
	stack := ev.CallStack
	suffix := ""
	if last := len(stack) - 1; last >= 0 && stack[last].Pos.Filename() == "<builtin>" {
		// The innermost frame is a built-in: name it on the error line.
		suffix = " in " + stack[last].Name
		stack = stack[:last]
	}
	lines := make([]string, len(stack))
	for i, fr := range stack {
		lines[i] = fmt.Sprintf("  %s: in %s", fr.Pos, fr.Name)
	}
	var b strings.Builder
	if len(lines) > 0 {
		b.WriteString("Traceback (most recent call last):\n")
	}
	for _, l := range collapseRepeats(lines) {
		b.WriteString(l + "\n")
	}
	fmt.Fprintf(&b, "error%s: %s", suffix, lowerErrorLines(ev.Msg))
	return b.String()
}

// lowerErrorLines lower-cases the "Error" that starts a line of an inner
// backtrace embedded in msg (an error in a loaded file).
func lowerErrorLines(msg string) string {
	lines := strings.Split(msg, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "Error in ") || strings.HasPrefix(l, "Error: ") {
			lines[i] = "e" + l[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// collapseRepeats replaces each block of lines that repeats back to back
// at least three times by one copy and a line saying how often it
// repeated, as Python does for recursion.
func collapseRepeats(lines []string) []string {
	var out []string
	for i := 0; i < len(lines); {
		bestPeriod, bestCount := 0, 1
		for p := 1; p <= maxRepeatPeriod && i+2*p <= len(lines); p++ {
			n := 1
			for i+(n+1)*p <= len(lines) && equalBlocks(lines[i:i+p], lines[i+n*p:i+(n+1)*p]) {
				n++
			}
			if n*p > bestCount*max(bestPeriod, 1) && n >= 3 {
				bestPeriod, bestCount = p, n
			}
		}
		if bestPeriod == 0 {
			out = append(out, lines[i])
			i++
			continue
		}
		out = append(out, lines[i:i+bestPeriod]...)
		noun := "line"
		if bestPeriod > 1 {
			noun = fmt.Sprintf("%d lines", bestPeriod)
		}
		out = append(out, fmt.Sprintf("  [the previous %s repeated %d more times]", noun, bestCount-1))
		i += bestPeriod * bestCount
	}
	return out
}

func equalBlocks(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
