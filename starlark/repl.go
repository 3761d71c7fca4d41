// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"

	star "go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// ErrInterrupt is what a LineReader returns for Ctrl-C while a line is
// typed: the input so far is discarded and the session goes on.
var ErrInterrupt = errors.New("interrupted")

// LineReader is where the REPL reads input: a line editor on a terminal,
// lines of standard input otherwise, a scripted reader in tests. Readline
// returns io.EOF for Ctrl-D and ErrInterrupt for Ctrl-C.
type LineReader interface {
	Readline() (string, error)
	SetPrompt(prompt string)
}

// REPL is an interactive session: module globals that persist between
// inputs, help(), completion, and per-input cancellation.
type REPL struct {
	h       *Host
	mu      sync.Mutex
	globals star.StringDict
	history *History
}

// SetHistory makes the session record its inputs in hist after each one
// is evaluated (so values it registered are already known), and offer the
// lines it keeps to the reader's own in-memory history when the reader has
// one (SaveHistory, as the CLI's terminal editor does).
func (r *REPL) SetHistory(hist *History) { r.history = hist }

// historySaver is a LineReader with in-memory history.
type historySaver interface {
	SaveHistory(line string) error
}

// NewREPL starts a session with the predeclared names and help().
func (h *Host) NewREPL() *REPL {
	g := h.Predeclared()
	r := &REPL{h: h, globals: g}
	g["help"] = star.NewBuiltin("help", r.help)
	return r
}

// Preload executes file and copies its globals into the session.
func (r *REPL) Preload(ctx context.Context, file string) error {
	if _, err := os.Stat(file); err != nil {
		return fmt.Errorf("recipe %w", err) // nothing to preload: not a script failure
	}
	thread, release := r.h.NewThread(ctx, "preload")
	defer release()
	g, err := r.h.ExecFile(thread, file)
	if err != nil {
		return &ScriptError{r.h.scrub.Error(err)}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range g {
		r.globals[k] = v
	}
	return nil
}

func (r *REPL) help(_ *star.Thread, b *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
	var v star.Value
	if err := star.UnpackPositionalArgs(b.Name(), args, kwargs, 0, &v); err != nil {
		return nil, err
	}
	if v == nil {
		fmt.Fprintf(r.h.stdout, "%s\n\n%s", Overview, Help(r.h.module))
		return star.None, nil
	}
	fmt.Fprint(r.h.stdout, Help(v))
	return star.None, nil
}

// Loop reads, evaluates and prints until the reader reports io.EOF
// (Ctrl-D). Ctrl-C while typing discards the input; a value on interrupts
// (Ctrl-C while a call runs) cancels that call and keeps the session.
func (r *REPL) Loop(ctx context.Context, in LineReader, interrupts <-chan struct{}) error {
	for {
		err := r.rep(ctx, in, interrupts)
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errors.Is(err, ErrInterrupt):
			continue
		case err != nil:
			return err
		}
	}
}

// rep handles one compound statement.
func (r *REPL) rep(ctx context.Context, in LineReader, interrupts <-chan struct{}) error {
	var readErr error
	var lines []string
	in.SetPrompt(">>> ")
	readLine := func() ([]byte, error) {
		line, err := in.Readline()
		in.SetPrompt("... ")
		if err != nil {
			readErr = err
			return nil, err
		}
		lines = append(lines, line)
		return []byte(line + "\n"), nil
	}
	defer func() {
		r.h.Flush()
		if readErr != nil || r.history == nil {
			return
		}
		kept, err := r.history.Add(lines)
		if err != nil {
			fmt.Fprintln(r.h.stderr, "warning: REPL history not saved:", err)
		}
		if hs, ok := in.(historySaver); ok {
			for _, l := range kept {
				_ = hs.SaveHistory(l)
			}
		}
	}()
	opts := FileOptions()
	opts.LoadBindsGlobally = true
	f, err := opts.ParseCompoundStmt("<stdin>", readLine)
	if readErr != nil {
		return readErr
	}
	if err != nil {
		r.printError(err)
		return nil
	}
	r.h.registerLiterals(f)

	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	thread, release := r.h.NewThread(callCtx, "repl")
	defer release()
	// The listener must be gone when this statement ends: a stale one
	// would take the next statement's Ctrl-C and cancel a finished thread.
	// A Ctrl-C from before this statement (typed at the prompt where the
	// terminal, not the editor, reads it) is not this statement's.
	for drained := false; !drained; {
		select {
		case <-interrupts:
		default:
			drained = true
		}
	}
	done := make(chan struct{})
	var listener sync.WaitGroup
	defer func() { close(done); listener.Wait() }()
	listener.Add(1)
	go func() {
		defer listener.Done()
		select {
		case <-interrupts:
			cancel()
			// Cancel the thread here too, not only through the context's
			// AfterFunc goroutine: a busy interpreter loop must see Ctrl-C
			// at its next step, however that goroutine is scheduled.
			thread.Cancel("interrupted: " + context.Canceled.Error())
		case <-done:
		}
	}()

	r.mu.Lock()
	defer r.mu.Unlock()
	if expr := soleExpr(f); expr != nil {
		v, err := star.EvalExprOptions(f.Options, thread, expr, r.globals)
		if err != nil {
			r.printError(err)
			return nil
		}
		r.globals["_"] = v
		if v != star.None {
			fmt.Fprintln(r.h.stdout, v)
		}
		return nil
	}
	if err := star.ExecREPLChunk(f, thread, r.globals); err != nil {
		r.printError(err)
	}
	return nil
}

func soleExpr(f *syntax.File) syntax.Expr {
	if len(f.Stmts) == 1 {
		if s, ok := f.Stmts[0].(*syntax.ExprStmt); ok {
			return s.X
		}
	}
	return nil
}

func (r *REPL) printError(err error) {
	fmt.Fprintln(r.h.stderr, (&ScriptError{r.h.scrub.Error(err)}).Error())
}

// Do completes the word before pos: globals and builtins for a bare name,
// attributes (AttrNames) after "x.". It returns what each candidate adds
// after the word and the length of the word, as line editors take them.
func (r *REPL) Do(line []rune, pos int) ([][]rune, int) {
	start := pos
	for start > 0 && isIdentRune(line[start-1]) {
		start--
	}
	word := string(line[start:pos])
	cands := r.Complete(word)
	base := word
	if i := strings.LastIndex(word, "."); i >= 0 {
		base = word[i+1:]
	}
	out := make([][]rune, len(cands))
	for i, c := range cands {
		out[i] = []rune(c[len(base):])
	}
	return out, len([]rune(base))
}

func isIdentRune(c rune) bool {
	return c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Complete returns the names that complete word ("pod", "podmin.dep"),
// sorted; for a dotted word only the last component is returned.
func (r *REPL) Complete(word string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var names []string
	prefix := word
	if i := strings.LastIndex(word, "."); i >= 0 {
		prefix = word[i+1:]
		v := r.lookup(word[:i])
		if a, ok := v.(star.HasAttrs); ok {
			names = a.AttrNames()
		}
	} else {
		for n := range r.globals {
			names = append(names, n)
		}
		for n := range star.Universe {
			names = append(names, n)
		}
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && !strings.HasPrefix(n, "_") || prefix != "" && strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// lookup resolves a dotted path of names without calling anything.
func (r *REPL) lookup(path string) star.Value {
	parts := strings.Split(path, ".")
	v, ok := r.globals[parts[0]]
	if !ok {
		v = star.Universe[parts[0]]
	}
	for _, p := range parts[1:] {
		a, ok := v.(star.HasAttrs)
		if !ok {
			return nil
		}
		next, err := a.Attr(p)
		if err != nil || next == nil {
			return nil
		}
		v = next
	}
	return v
}
