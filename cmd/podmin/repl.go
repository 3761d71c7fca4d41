// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"path/filepath"

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
	rl, err := readline.NewEx(&readline.Config{
		Prompt:                 ">>> ",
		AutoComplete:           r,
		DisableAutoSaveHistory: true,
		Stdin:                  readlineStdin(env),
		Stdout:                 stdout,
		Stderr:                 stderr,
	})
	if err != nil {
		return nil, err
	}
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
