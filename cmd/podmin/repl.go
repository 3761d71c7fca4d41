// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/peterh/liner"
	"golang.org/x/term"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/paths"
	pstar "podmin.dev/podmin/starlark"
)

// replHistoryFile is the REPL history's name in the Podmin data directory.
const replHistoryFile = "repl_history"

// replReader is the REPL's line reader; Close gives the terminal back.
type replReader interface {
	pstar.LineReader
	Close() error
}

// newReplReader returns the REPL's line reader: a line editor with history
// and Tab completion when standard input and output are a terminal, else
// the lines of standard input, without prompts. The history file is not
// the editor's: Podmin writes it (mode 0600, no line with a secret value)
// and only seeds the editor's in-memory history from it. On a terminal, a
// destructive call without confirm = asks through the same editor.
func newReplReader(env *builtins.Env, h *pstar.Host, r *pstar.REPL, stdout, stderr io.Writer) (replReader, error) {
	if err := paths.EnsureDir(env.Dirs.Data); err != nil {
		return nil, err
	}
	hist, err := pstar.OpenHistory(filepath.Join(env.Dirs.Data, replHistoryFile), h.Scrubber())
	if err != nil {
		return nil, err
	}
	r.SetHistory(hist)
	// The editor reads and draws on the process's own standard input and
	// output: only when both are the terminal.
	if terminal(env) != os.Stdin || !term.IsTerminal(int(os.Stdout.Fd())) {
		pr := &plainReader{in: bufio.NewReader(stdinOf(env))}
		if terminal(env) != nil {
			// Output goes elsewhere, but the operator is at the terminal:
			// ask there, on standard error.
			h.SetConfirm(func(question string) (string, error) {
				_, _ = io.WriteString(stderr, question)
				flush(stderr)
				return pr.Readline()
			})
		}
		return pr, nil
	}
	ed := &lineEditor{State: liner.NewLiner(), prompt: ">>> "}
	ed.SetCtrlCAborts(true)
	ed.SetWordCompleter((&listingCompleter{r: r, out: stdout}).complete)
	for _, l := range hist.Lines() {
		ed.AppendHistory(l)
	}
	// As on the command line, the operator types the cluster ID.
	h.SetConfirm(func(question string) (string, error) { return ed.Prompt(question) })
	return ed, nil
}

// flush writes out what a scrubbing writer held back: a prompt or a list
// that does not end a line of output.
func flush(w io.Writer) {
	if f, ok := w.(interface{ Flush() error }); ok {
		_ = f.Flush()
	}
}

// stdinOf is the REPL's input when it is not a terminal.
func stdinOf(env *builtins.Env) io.Reader {
	if env.Stdin == nil {
		return strings.NewReader("")
	}
	return env.Stdin
}

// lineEditor is liner's editor as the REPL's LineReader.
type lineEditor struct {
	*liner.State
	prompt string
}

// Readline implements pstar.LineReader.
func (e *lineEditor) Readline() (string, error) {
	line, err := e.Prompt(e.prompt)
	if errors.Is(err, liner.ErrPromptAborted) {
		return "", pstar.ErrInterrupt
	}
	return line, err
}

// SetPrompt implements pstar.LineReader.
func (e *lineEditor) SetPrompt(p string) { e.prompt = p }

// SaveHistory offers a kept line to the editor's in-memory history.
func (e *lineEditor) SaveHistory(line string) error {
	e.AppendHistory(line)
	return nil
}

// plainReader reads the lines of a non-terminal input: nothing to edit,
// no prompt to show.
type plainReader struct{ in *bufio.Reader }

// Readline implements pstar.LineReader; a last line without a newline
// still counts.
func (p *plainReader) Readline() (string, error) {
	line, err := p.in.ReadString('\n')
	if err != nil && (line == "" || !errors.Is(err, io.EOF)) {
		return "", err
	}
	return strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"), nil
}

// SetPrompt implements pstar.LineReader: there is nobody to prompt.
func (*plainReader) SetPrompt(string) {}

// Close implements replReader.
func (*plainReader) Close() error { return nil }

// listingCompleter completes like bash: Tab completes what all candidates
// share, and a second Tab on the same input lists them once above the
// prompt, which the editor then draws again below the list.
type listingCompleter struct {
	r    *pstar.REPL
	out  io.Writer // standard output, the terminal
	last string    // the input of the Tab before, "" after anything else
}

// complete implements liner.WordCompleter: it returns what comes before
// the word, the word's replacements (at most one, so the editor never
// cycles or lists on its own), and what comes after the cursor.
func (c *listingCompleter) complete(text string, pos int) (string, []string, string) {
	line := []rune(text)
	cands, n := c.r.Do(line, pos)
	head, typed, tail := string(line[:pos-n]), string(line[pos-n:pos]), string(line[pos:])
	input := string(line[:pos])
	switch {
	case len(cands) == 0:
		c.last = ""
		return head, nil, tail
	case len(cands) == 1:
		c.last = ""
		return head, []string{typed + string(cands[0])}, tail
	}
	if same := sharedPrefix(cands); len(same) > 0 {
		c.last = input + string(same) // the next Tab lists what is left
		return head, []string{typed + string(same)}, tail
	}
	if c.last != input {
		c.last = input
		return head, nil, tail
	}
	c.last = ""
	names := make([]string, len(cands))
	for i, cand := range cands {
		names[i] = typed + string(cand)
	}
	_, _ = io.WriteString(c.out, "\n"+columns(names, 80))
	flush(c.out) // before the editor draws the prompt below it
	// The word itself as the one completion makes the editor redraw the
	// prompt and the line below the list.
	return head, []string{typed}, tail
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
