// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"fmt"
	"strings"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/scrub"
)

// ErrNotConfirmed reports a destructive operation without confirmation; it
// is builtins.ErrNotConfirmed, so the CLI maps it to exit status 4.
var ErrNotConfirmed = builtins.ErrNotConfirmed

// confirmParam is the parameter every destructive builtin takes. Builtins
// adds it to each Builtin marked Destructive; the guard consumes it before
// the builtin's own arguments are unpacked.
var confirmParam = Param{Name: "confirm", Type: "bool | str",
	Doc: "confirms this destructive call: True, or the cluster's ID (or run with --yes); False refuses it, whatever --yes says"}

// guard is the one confirmation check of every destructive builtin. It
// runs before the builtin unpacks its arguments or calls anything.
//
// confirm = "<cluster>" is a check, not an answer: a cluster other than
// the one the call acts on refuses the call whatever else was given
// (--yes, a dry run, a prompt). confirm = False is the script's own "no",
// which nothing overrides either. Without confirm the call asks a
// question, and --yes or the operator typing the cluster ID on the REPL's
// terminal answers it. A dry run changes nothing, so its
// calls need no answer: they are recorded in the plan as destructive.
// A script never prompts.
func (c *call) guard(confirm star.Value) error {
	target := func() string {
		if c.b.confirmTarget != nil {
			if t := c.b.confirmTarget(c); t != "" {
				return t
			}
		}
		if cur, err := c.host.ops.CurrentContext(); err == nil {
			return cur.Cluster
		}
		return ""
	}
	switch v := confirm.(type) {
	case nil, star.NoneType:
	case star.Bool:
		if v {
			return nil
		}
		// An explicit False is the script's answer: no. --yes answers
		// only calls that give none, and a dry run plans what a real run
		// does, which is to refuse.
		return fmt.Errorf("%w: %s is destructive and the script says confirm = False: it was refused (--yes answers only calls that give no confirm =); nothing was changed", ErrNotConfirmed, c.b.FullName())
	case star.String:
		t := target()
		if t == "" {
			return fmt.Errorf("%w: confirm = %s names a cluster, but there is no current context to compare it with: pass confirm = True", ErrNotConfirmed, scrub.Quote(string(v)))
		}
		if string(v) != t {
			return fmt.Errorf("%w: confirm = %s does not match the cluster %q: %s is destructive and was refused (a named cluster is a check that --yes does not override); nothing was changed", ErrNotConfirmed, scrub.Quote(string(v)), t, c.b.FullName())
		}
		return nil
	default:
		return fmt.Errorf("for parameter confirm: got %s, want bool or str", confirm.Type())
	}
	if c.host.opts.Yes {
		return nil
	}
	if c.host.planned() {
		c.unanswered = true // the plan says a real run must confirm it
		return nil
	}
	t := target()
	if ask := c.host.opts.Confirm; ask != nil {
		if t == "" {
			return fmt.Errorf("%w: %s is destructive and there is no current context whose cluster ID to type: pass confirm = True", ErrNotConfirmed, c.b.FullName())
		}
		typed, err := ask(fmt.Sprintf("%s is destructive. Type the cluster ID (%s) to confirm: ", c.call(), t))
		if err != nil {
			return fmt.Errorf("%w: read confirmation: %v", ErrNotConfirmed, err)
		}
		if strings.TrimSpace(typed) != t {
			return fmt.Errorf("%w: you typed %s, not the cluster ID %q; nothing was changed", ErrNotConfirmed, scrub.Quote(strings.TrimSpace(typed)), t)
		}
		return nil
	}
	how := "confirm = True"
	if t != "" {
		how = fmt.Sprintf("confirm = %q (the cluster) or confirm = True", t)
	}
	return fmt.Errorf("%w: %s is destructive: pass %s, or run the script with podmin run --yes (-y)", ErrNotConfirmed, c.b.FullName(), how)
}

// call renders the call being confirmed with its subject, e.g.
// podmin.deployments.delete("web").
func (c *call) call() string {
	if p := c.b.Positional(); p != "" {
		if s := c.subject(p); s != "" {
			return c.b.FullName() + "(" + scrub.Quote(s) + ")"
		}
	}
	return c.b.FullName() + "()"
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// takeKwarg removes name = … from kwargs and returns its value, or nil.
func takeKwarg(kwargs []star.Tuple, name string) ([]star.Tuple, star.Value) {
	for i, kv := range kwargs {
		if k, ok := kv[0].(star.String); ok && string(k) == name {
			rest := append(append([]star.Tuple{}, kwargs[:i]...), kwargs[i+1:]...)
			return rest, kv[1]
		}
	}
	return kwargs, nil
}

// subject returns the subject argument (positional, or by its keyword
// name) when it is a str, before the arguments are unpacked.
func (c *call) subject(name string) string {
	if len(c.args) > 0 {
		if s, ok := c.args[0].(star.String); ok {
			return string(s)
		}
	}
	for _, kv := range c.kwargs {
		if k, ok := kv[0].(star.String); ok && string(k) == name {
			if s, ok := kv[1].(star.String); ok {
				return string(s)
			}
		}
	}
	return ""
}
