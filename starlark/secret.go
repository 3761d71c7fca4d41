// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"errors"
	"fmt"

	star "go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"podmin.dev/podmin/internal/scrub"
)

// Secret is an opaque secret value. str(), repr() and print() show
// <secret KEY>; it has no attributes, no length, no indexing, slicing or
// iteration, cannot be concatenated or used as a dict key, compares with
// == and != only against another secret, and only the builtins that take
// a secret value unwrap it. Its value is registered with the scrubber
// before the Secret exists.
type Secret struct {
	key   string
	value string
}

var (
	_ star.Value      = (*Secret)(nil)
	_ star.Comparable = (*Secret)(nil)
	_ star.HasBinary  = (*Secret)(nil)
)

// NewSecret registers value with the thread's scrubber and wraps it. Every
// builtin that reads a secret returns one of these, never a str.
func NewSecret(thread *star.Thread, key, value string) *Secret {
	reg := scrub.Process()
	if h := hostOf(thread); h != nil {
		reg = h.scrub
	}
	reg.AddString(key, value)
	return &Secret{key: key, value: value}
}

// Key is the secret's name.
func (s *Secret) Key() string { return s.key }

// Reveal returns the plaintext; only builtins that write secrets call it.
func (s *Secret) Reveal() string { return s.value }

func (s *Secret) String() string   { return scrub.Redacted(s.key) }
func (s *Secret) Type() string     { return "secret" }
func (s *Secret) Freeze()          {}
func (s *Secret) Truth() star.Bool { return true }
func (s *Secret) Hash() (uint32, error) {
	return 0, errors.New("unhashable type: secret (a secret cannot be a dict key or set element)")
}

// errSecretOp is the error of every operation that would reveal a secret.
func errSecretOp(what string) error {
	return fmt.Errorf("%s: a secret is opaque: pass it whole to a builtin that takes a secret (value = ...), it cannot become part of a string", what)
}

// Binary refuses every binary operator, with either operand order, so
// "prefix" + secret fails with an error that explains why.
func (s *Secret) Binary(op syntax.Token, y star.Value, side star.Side) (star.Value, error) {
	other := y.Type()
	if side == star.Left {
		return nil, errSecretOp(fmt.Sprintf("secret %s %s", op, other))
	}
	return nil, errSecretOp(fmt.Sprintf("%s %s secret", other, op))
}

// CompareSameType allows == and != only, so a secret's bytes cannot be
// probed with < and >.
func (s *Secret) CompareSameType(op syntax.Token, y star.Value, _ int) (bool, error) {
	o := y.(*Secret)
	switch op {
	case syntax.EQL:
		return s.value == o.value, nil
	case syntax.NEQ:
		return s.value != o.value, nil
	}
	return false, errors.New("secrets cannot be ordered")
}

// secretValueParam is the parameter of podmin.secret.
var secretParams = []Param{
	{Name: "value", Type: "str | secret", Positional: true, Required: true, Doc: "the value; registered with the scrubber before anything else happens"},
	{Name: "key", Type: "str", Doc: "the name shown in its place: <secret KEY>"},
}

func secretValueFamily() []*Builtin {
	return []*Builtin{secretParamBuiltin(), {
		Name:    "secret",
		Returns: "secret",
		Params:  secretParams,
		Doc: `Wraps a value as an opaque secret.

podmin.secret("…", key = "db-password") prints as <secret db-password>. The
value is registered with the scrubber before the call does anything else, so
it never appears in what Podmin prints, even when a str copy of it is printed
later. A secret cannot be sliced, concatenated, formatted into a str or
encoded as JSON; secrets.create and secrets.update take it as value =.`,
		impl: func(c *call) (star.Value, error) {
			// Register first: even an argument error must not print it.
			if len(c.args) > 0 {
				if s, ok := c.args[0].(star.String); ok {
					c.host.scrub.AddString(literalKey(c.kwargs), string(s))
				}
			}
			var v star.Value
			var key string
			if err := c.unpack(&v, &key); err != nil {
				return nil, err
			}
			switch x := v.(type) {
			case star.String:
				return NewSecret(c.thread, key, string(x)), nil
			case *Secret:
				if key == "" {
					return x, nil
				}
				return NewSecret(c.thread, key, x.value), nil
			}
			// A wrong type is the script's own mistake, as in UnpackArgs.
			return nil, &argError{msg: fmt.Sprintf("for parameter value: got %s, want str or secret", v.Type())}
		},
	}}
}

// literalKey finds key = "…" among kwargs, for labelling a value before
// the arguments are checked.
func literalKey(kwargs []star.Tuple) string {
	for _, kv := range kwargs {
		if k, ok := kv[0].(star.String); ok && k == "key" {
			if v, ok := kv[1].(star.String); ok {
				return string(v)
			}
		}
	}
	return ""
}

// registerLiterals registers, before a file or REPL input runs, the string
// literals it passes as secret values: the first argument of
// podmin.secret(...) and value = of secrets.create/update, given directly
// or through a NAME = "…" assignment. A script that prints such a value
// before it creates the secret then prints <secret KEY> instead.
func (h *Host) registerLiterals(f *syntax.File) {
	strs := map[string]string{}
	var calls []*syntax.CallExpr
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.AssignStmt:
			if id, ok := n.LHS.(*syntax.Ident); ok {
				if s, ok := stringLiteral(n.RHS); ok {
					strs[id.Name] = s
				}
			}
		case *syntax.CallExpr:
			calls = append(calls, n)
		}
		return true
	})
	resolve := func(e syntax.Expr) (string, bool) {
		if s, ok := stringLiteral(e); ok {
			return s, true
		}
		if id, ok := e.(*syntax.Ident); ok {
			s, ok := strs[id.Name]
			return s, ok
		}
		return "", false
	}
	for _, c := range calls {
		name := dottedName(c.Fn)
		var value, key syntax.Expr
		switch {
		case name == "secret" || hasSuffix(name, ".secret"):
			if len(c.Args) > 0 {
				if _, kw := c.Args[0].(*syntax.BinaryExpr); !kw {
					value = c.Args[0]
				}
			}
			key = keyword(c, "key")
		case hasSuffix(name, "secrets.create") || hasSuffix(name, "secrets.update"):
			if len(c.Args) > 0 {
				key = c.Args[0]
			}
		default:
			continue
		}
		if v := keyword(c, "value"); v != nil {
			value = v
		}
		if value == nil {
			continue
		}
		if s, ok := resolve(value); ok {
			label, _ := resolve(key)
			h.scrub.AddString(label, s)
		}
	}
}

func stringLiteral(e syntax.Expr) (string, bool) {
	if lit, ok := e.(*syntax.Literal); ok && lit.Token == syntax.STRING {
		s, ok := lit.Value.(string)
		return s, ok
	}
	return "", false
}

// keyword returns the expression passed as name = … in c, or nil.
func keyword(c *syntax.CallExpr, name string) syntax.Expr {
	for _, a := range c.Args {
		if b, ok := a.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ {
			if id, ok := b.X.(*syntax.Ident); ok && id.Name == name {
				return b.Y
			}
		}
	}
	return nil
}

// dottedName renders podmin.secrets.create from its expression, or "".
func dottedName(e syntax.Expr) string {
	switch e := e.(type) {
	case *syntax.Ident:
		return e.Name
	case *syntax.DotExpr:
		if x := dottedName(e.X); x != "" {
			return x + "." + e.Name.Name
		}
	}
	return ""
}

func hasSuffix(s, suffix string) bool {
	return len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix
}
