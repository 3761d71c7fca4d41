// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"fmt"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/builtins"
)

// ErrNotConfirmed reports a destructive operation without confirmation; it
// is builtins.ErrNotConfirmed, so the CLI maps it to exit status 4.
var ErrNotConfirmed = builtins.ErrNotConfirmed

// confirmParam is the parameter every destructive builtin takes. Builtins
// adds it to each Builtin marked Destructive; the guard consumes it before
// the builtin's own arguments are unpacked.
var confirmParam = Param{Name: "confirm", Type: "bool | str", Default: "False",
	Doc: "confirms this destructive call: True, or the cluster's ID (or run with --yes)"}

// guard is the one confirmation check of every destructive builtin. It
// runs before the builtin unpacks its arguments or calls anything, and
// passes when the run was started with --yes, when confirm is True or
// names the target cluster, or when the host may ask (the REPL on a
// terminal) and the answer is yes. A script never prompts.
func (c *call) guard(confirm star.Value) error {
	if c.host.opts.Yes {
		return nil
	}
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
	case star.String:
		t := target()
		if t == "" {
			return fmt.Errorf("%w: confirm = %q names a cluster, but there is no current context to compare it with: pass confirm = True", ErrNotConfirmed, string(v))
		}
		if string(v) != t {
			return fmt.Errorf("%w: confirm = %q does not match the cluster %q: %s is destructive; pass confirm = %q", ErrNotConfirmed, string(v), t, c.b.FullName(), t)
		}
		return nil
	default:
		return fmt.Errorf("for parameter confirm: got %s, want bool or str", confirm.Type())
	}
	t := target()
	if ask := c.host.opts.Confirm; ask != nil {
		ok, err := ask(fmt.Sprintf("%s is destructive (cluster %s). Proceed? [y/N] ", c.b.FullName(), orNone(t)))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrNotConfirmed, err)
		}
		if ok {
			return nil
		}
		return fmt.Errorf("%w: %s was not confirmed; nothing was changed", ErrNotConfirmed, c.b.FullName())
	}
	how := "confirm = True"
	if t != "" {
		how = fmt.Sprintf("confirm = %q (the cluster) or confirm = True", t)
	}
	return fmt.Errorf("%w: %s is destructive: pass %s, or run the script with podmin run --yes (-y)", ErrNotConfirmed, c.b.FullName(), how)
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
