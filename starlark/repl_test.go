// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	star "go.starlark.net/starlark"
)

// scriptedReader feeds the REPL lines (or errors) and records prompts.
type scriptedReader struct {
	items   []any // string, or an error such as io.EOF / ErrInterrupt
	prompts []string
	prompt  string
}

func (s *scriptedReader) SetPrompt(p string) { s.prompt = p }

func (s *scriptedReader) Readline() (string, error) {
	s.prompts = append(s.prompts, s.prompt)
	if len(s.items) == 0 {
		return "", io.EOF
	}
	it := s.items[0]
	s.items = s.items[1:]
	if err, ok := it.(error); ok {
		return "", err
	}
	return it.(string), nil
}

func TestREPLLoop(t *testing.T) {
	e := newEnv(t)
	r := e.host(Options{}).NewREPL()
	interrupts := make(chan struct{})
	// started delivers Ctrl-C from inside the running call: the send
	// completes only when the REPL's interrupt listener has taken it, so the
	// cancellation is in place before the runaway loop below begins, however
	// the goroutines are scheduled.
	r.globals["started"] = star.NewBuiltin("started", func(*star.Thread, *star.Builtin, star.Tuple, []star.Tuple) (star.Value, error) {
		select {
		case interrupts <- struct{}{}:
		case <-time.After(30 * time.Second):
			return nil, errors.New("the REPL is not listening for interrupts")
		}
		return star.None, nil
	})
	in := &scriptedReader{items: []any{
		"x = 1 + 2",
		"x",
		"_ * 2",
		"def f(n):",
		"    return n * 10",
		"",
		"f(4)",
		"half = ", ErrInterrupt, // Ctrl-C while typing discards the input
		"help(podmin.deployments.delete)",
		"help(podmin.contexts)",
		"def spin():",
		"    started()",
		"    while True:",
		"        pass",
		"",
		"spin()", // interrupted while running
		"[c.cluster for c in podmin.contexts.list()]",
		"undefined_name",
		io.EOF,
	}}
	if err := r.Loop(context.Background(), in, interrupts); err != nil {
		t.Fatal(err)
	}
	out := e.stdout.String()
	for _, w := range []string{
		"3\n6\n40\n",
		"podmin.deployments.delete(name, *, nodegroup, ignore_not_found=False, confirm=None)\n\nRemoves a deployment",
		"module podmin.contexts:\n  connect",
		"[\"test\"]\n",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("stdout lacks %q:\n%s", w, out)
		}
	}
	errs := e.stderr.String()
	for _, w := range []string{"interrupted: context canceled", "<stdin>:1:1: undefined: undefined_name"} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errs)
		}
	}
	if strings.Contains(out+errs, "half") {
		t.Errorf("the interrupted input ran")
	}
	if !reflect.DeepEqual(in.prompts[:7], []string{">>> ", ">>> ", ">>> ", ">>> ", "... ", "... ", ">>> "}) {
		t.Errorf("prompts %q", in.prompts[:7])
	}
}

func TestREPLCompletion(t *testing.T) {
	e := newEnv(t)
	// No step limit: the runaway loop below must end by the interrupt alone,
	// however slowly the interrupting goroutine is scheduled.
	r := e.host(Options{MaxSteps: 1 << 62}).NewREPL()
	if err := r.Preload(context.Background(), e.write("pre.star", "deploy_all = 1\n_private = 2\n")); err != nil {
		t.Fatal(err)
	}
	for word, want := range map[string][]string{
		"pod":                   {"podmin"},
		"podmin.dep":            {"deployments", "deps"},
		"podmin.deployments.de": {"delete", "deploy"},
		"dep":                   {"deploy_all"},
		"_pr":                   {"_private"},
		"json.enc":              {"encode", "encode_indent"},
		"nothing.here":          nil,
	} {
		if got := r.Complete(word); !reflect.DeepEqual(got, want) {
			t.Errorf("Complete(%q) = %q, want %q", word, got, want)
		}
	}
	line := []rune("x = podmin.deployments.de")
	got, n := r.Do(line, len(line))
	if n != 2 || len(got) != 2 || string(got[0]) != "lete" || string(got[1]) != "ploy" {
		t.Errorf("Do = %q, %d", got, n)
	}
}

// The CLI forwards Ctrl-C into a channel of one: one that arrives before
// the running call's listener is ready waits for it, and one left from
// before a statement (typed at the prompt) never cancels the statement.
func TestREPLInterruptsBuffered(t *testing.T) {
	e := newEnv(t)
	r := e.host(Options{}).NewREPL()
	interrupts := make(chan struct{}, 1)
	interrupts <- struct{}{} // Ctrl-C at the prompt, before any statement
	// ctrlC forwards Ctrl-C as the CLI does: without waiting for anyone.
	r.globals["ctrlC"] = star.NewBuiltin("ctrlC", func(*star.Thread, *star.Builtin, star.Tuple, []star.Tuple) (star.Value, error) {
		select {
		case interrupts <- struct{}{}:
		default:
		}
		return star.None, nil
	})
	// settle returns once nothing waits in the channel: on a REPL that
	// handed the stale Ctrl-C to the statement's listener, the loop after
	// it is cancelled.
	r.globals["settle"] = star.NewBuiltin("settle", func(*star.Thread, *star.Builtin, star.Tuple, []star.Tuple) (star.Value, error) {
		deadline := time.Now().Add(10 * time.Second)
		for len(interrupts) > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(10 * time.Millisecond)
		return star.None, nil
	})
	in := &scriptedReader{items: []any{
		"def first():",
		"    settle()",
		"    for i in range(100):",
		"        pass",
		"    return 20 + 22",
		"",
		"x = first()",
		"x",
		"def spin():",
		"    ctrlC()",
		"    while True:",
		"        pass",
		"",
		"spin()",
		"'after'",
		io.EOF,
	}}
	done := make(chan error, 1)
	go func() { done <- r.Loop(context.Background(), in, interrupts) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the interrupt sent while the call ran did not end it")
	}
	out, errs := e.stdout.String(), e.stderr.String()
	if !strings.Contains(out, "42\n") || !strings.Contains(out, "\"after\"\n") {
		t.Errorf("stdout %q: want the statement before the call and the one after it", out)
	}
	if n := strings.Count(errs, "interrupted: context canceled"); n != 1 {
		t.Errorf("stderr %q: want exactly the call interrupted", errs)
	}
}
