// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"path/filepath"
	"strings"

	"github.com/chzyer/readline"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/paths"
	pstar "podmin.dev/podmin/starlark"
)

// replHistoryFile is the REPL history's name in the Podmin data directory.
const replHistoryFile = "repl_history"

// newReplReader returns the REPL's line editor. The history file is not
// readline's: Podmin writes it (mode 0600, no line with a secret value)
// and only seeds readline's in-memory history from it. On a terminal, a
// destructive call without confirm = asks through the same editor.
func newReplReader(env *builtins.Env, h *pstar.Host, r *pstar.REPL, stdout, stderr io.Writer) (*readline.Instance, error) {
	if err := paths.EnsureDir(env.Dirs.Data); err != nil {
		return nil, err
	}
	hist, err := pstar.OpenHistory(filepath.Join(env.Dirs.Data, replHistoryFile), h.Scrubber())
	if err != nil {
		return nil, err
	}
	lister := &listingCompleter{r: r}
	rl, err := readline.NewEx(&readline.Config{
		Prompt:                 ">>> ",
		AutoComplete:           lister,
		DisableAutoSaveHistory: true,
		Stdin:                  readlineStdin(env),
		Stdout:                 stdout,
		Stderr:                 stderr,
	})
	if err != nil {
		return nil, err
	}
	lister.out = rl.Stdout()
	for _, l := range hist.Lines() {
		_ = rl.SaveHistory(l)
	}
	r.SetHistory(hist)
	if terminal(env) != nil {
		// As on the command line, the operator types the cluster ID.
		h.SetConfirm(func(question string) (string, error) {
			rl.SetPrompt(question)
			defer rl.SetPrompt(">>> ")
			return rl.Readline()
		})
	}
	return rl, nil
}

// readlineStdin is the REPL's input: env.Stdin when set, else readline's
// default (the process's standard input).
func readlineStdin(env *builtins.Env) io.ReadCloser {
	if env.Stdin == nil {
		return nil
	}
	if rc, ok := env.Stdin.(io.ReadCloser); ok {
		return rc
	}
	return io.NopCloser(env.Stdin)
}

// listingCompleter completes like bash: Tab completes what all candidates
// share, and a second Tab on the same input lists them once above the
// prompt. Readline's own list mode draws the list, then redraws it with
// the prompt, which a terminal that does not move the cursor shows twice
// or more.
type listingCompleter struct {
	r    *pstar.REPL
	out  io.Writer // above the prompt: the line editor redraws it below
	last string    // the input of the Tab before, "" after anything else
}

// Do implements readline.AutoCompleter.
func (c *listingCompleter) Do(line []rune, pos int) ([][]rune, int) {
	cands, n := c.r.Do(line, pos)
	input := string(line[:pos])
	if len(cands) <= 1 {
		c.last = ""
		return cands, n
	}
	if same := sharedPrefix(cands); len(same) > 0 {
		c.last = input + string(same) // the next Tab lists what is left
		return [][]rune{same}, n
	}
	if c.last != input || c.out == nil {
		c.last = input
		return nil, 0
	}
	c.last = ""
	typed := string(line[pos-n : pos])
	names := make([]string, len(cands))
	for i, cand := range cands {
		names[i] = typed + string(cand)
	}
	_, _ = io.WriteString(c.out, columns(names, 80))
	return nil, 0
}

// sharedPrefix is the longest prefix all candidates share.
func sharedPrefix(cands [][]rune) []rune {
	p := cands[0]
	for _, c := range cands[1:] {
		i := 0
		for i < len(p) && i < len(c) && p[i] == c[i] {
			i++
		}
		p = p[:i]
	}
	return p
}

// columns lays names out in columns no wider than width, one line each.
func columns(names []string, width int) string {
	w := 0
	for _, n := range names {
		w = max(w, len(n))
	}
	w += 2
	per := max(1, width/w)
	var b strings.Builder
	for i, n := range names {
		b.WriteString(n)
		if (i+1)%per == 0 || i == len(names)-1 {
			b.WriteString("\n")
		} else {
			b.WriteString(strings.Repeat(" ", w-len(n)))
		}
	}
	return b.String()
}
