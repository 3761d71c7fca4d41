// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	star "go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"

	"podmin.dev/podmin/internal/scrub"
)

// newTestT builds the t passed to test_*(t): t.name, t.workdir,
// t.assert.eq/ne/true/contains, t.fails(fn, "regexp"),
// t.run(main, **kwargs), t.fake_registry() and t.fake_nodes().
func newTestT(name string, sb *sandbox) star.Value {
	assert := &starlarkstruct.Module{Name: "assert", Members: star.StringDict{
		"eq":       star.NewBuiltin("t.assert.eq", assertEq(true)),
		"ne":       star.NewBuiltin("t.assert.ne", assertEq(false)),
		"true":     star.NewBuiltin("t.assert.true", assertTrue),
		"contains": star.NewBuiltin("t.assert.contains", assertContains),
	}}
	assert.Freeze()
	return result("t", str("name", name), str("workdir", sb.host.opts.WorkDir), value("assert", assert),
		value("fails", star.NewBuiltin("t.fails", testFails)), value("run", star.NewBuiltin("t.run", testRun)),
		value("fake_registry", fakeRegistryBuiltin(sb)), value("fake_nodes", fakeNodesBuiltin(sb.nodes)))
}

func message(msg string, format string, args ...any) error {
	text := fmt.Sprintf(format, args...)
	if msg != "" {
		text = msg + ": " + text
	}
	return errors.New(text)
}

func assertEq(want bool) func(*star.Thread, *star.Builtin, star.Tuple, []star.Tuple) (star.Value, error) {
	return func(_ *star.Thread, b *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
		var x, y star.Value
		var msg string
		if err := star.UnpackArgs(b.Name(), args, kwargs, "got", &x, "want", &y, "msg?", &msg); err != nil {
			return nil, err
		}
		eq, err := star.Equal(x, y)
		if err != nil {
			return nil, err
		}
		switch {
		case want && !eq:
			return nil, message(msg, "%s: got %s, want %s", b.Name(), x, y)
		case !want && eq:
			return nil, message(msg, "%s: got %s, want anything else", b.Name(), x)
		}
		return star.None, nil
	}
}

func assertTrue(_ *star.Thread, b *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
	var x star.Value
	var msg string
	if err := star.UnpackArgs(b.Name(), args, kwargs, "cond", &x, "msg?", &msg); err != nil {
		return nil, err
	}
	if !x.Truth() {
		return nil, message(msg, "%s: %s is not true", b.Name(), x)
	}
	return star.None, nil
}

func assertContains(_ *star.Thread, b *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
	var container, item star.Value
	var msg string
	if err := star.UnpackArgs(b.Name(), args, kwargs, "container", &container, "item", &item, "msg?", &msg); err != nil {
		return nil, err
	}
	if s, ok := star.AsString(container); ok {
		sub, ok := star.AsString(item)
		if !ok {
			return nil, fmt.Errorf("%s: a string contains strings, not %s", b.Name(), item.Type())
		}
		if !strings.Contains(s, sub) {
			return nil, message(msg, "%s: %q does not contain %q", b.Name(), s, sub)
		}
		return star.None, nil
	}
	in, err := star.Binary(syntaxIn, item, container)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.Name(), err)
	}
	if !in.Truth() {
		return nil, message(msg, "%s: %s does not contain %s", b.Name(), container, item)
	}
	return star.None, nil
}

// testFails calls fn() and succeeds only when it fails with an error that
// matches the regular expression; it returns the error message.
func testFails(thread *star.Thread, b *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
	var fn star.Callable
	var pattern string
	if err := star.UnpackPositionalArgs(b.Name(), args, kwargs, 2, &fn, &pattern); err != nil {
		return nil, err
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("%s: bad regexp: %w", b.Name(), err)
	}
	_, callErr := star.Call(thread, fn, nil, nil)
	if callErr == nil {
		return nil, fmt.Errorf("%s: %s succeeded; want an error matching %q", b.Name(), fn.Name(), pattern)
	}
	msg := callErr.Error()
	var ev *star.EvalError
	if errors.As(callErr, &ev) {
		msg = ev.Msg
	}
	if !re.MatchString(msg) {
		return nil, fmt.Errorf("%s: error %q does not match %q", b.Name(), msg, pattern)
	}
	return star.String(msg), nil
}

// testRun calls a recipe's main(ctx, **kwargs) as podmin run would, with
// the keyword arguments as ctx.args.
func testRun(thread *star.Thread, b *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
	var fn star.Callable
	if err := star.UnpackPositionalArgs(b.Name(), args, nil, 1, &fn); err != nil {
		return nil, err
	}
	h := hostOf(thread)
	if f, ok := fn.(*star.Function); ok {
		var err error
		if kwargs, err = typedKwargs(h.scrub, mainParams(f), f.HasKwargs(), kwargs); err != nil {
			return nil, fmt.Errorf("%s: %w", b.Name(), err)
		}
	}
	ctxv, err := h.runContext(kwargs)
	if err != nil {
		return nil, err
	}
	return star.Call(thread, fn, star.Tuple{ctxv}, kwargs)
}

// typedKwargs applies podmin run's argument checks to t.run's keyword
// arguments: a string is converted exactly as a --key=value would be, any
// other value must already have the type of the parameter's default, and
// required parameters must be given.
func typedKwargs(reg *scrub.Registry, params []mainParam, anyKwargs bool, kwargs []star.Tuple) ([]star.Tuple, error) {
	byName := map[string]mainParam{}
	for _, p := range params {
		byName[p.name] = p
	}
	given := map[string]bool{}
	out := make([]star.Tuple, 0, len(kwargs))
	for _, kv := range kwargs {
		name := string(kv[0].(star.String))
		p, ok := byName[name]
		if !ok {
			if !anyKwargs {
				return nil, fmt.Errorf("unknown parameter %s: main takes %s", name, keywordNames(params))
			}
			p = mainParam{name: name, def: star.String("")}
		}
		given[name] = true
		v := kv[1]
		if isSecretParam(p) {
			sv, err := secretKwarg(reg, p, v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			out = append(out, star.Tuple{kv[0], sv})
			continue
		}
		if s, isStr := v.(star.String); isStr {
			cv, err := convertArg(p, string(s), nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			v = cv
		} else if err := sameType(p, v); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, star.Tuple{kv[0], v})
	}
	out = append(out, omittedSecrets(params, func(n string) bool { return given[n] })...)
	var missing []string
	for _, p := range params {
		if p.required() && !given[p.name] {
			missing = append(missing, p.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing required parameter(s) %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// sameType checks a non-string value against the parameter's type.
func sameType(p mainParam, v star.Value) error {
	want := p.typeName()
	switch v.(type) {
	case star.Bool:
		if want == "bool" {
			return nil
		}
	case star.Int:
		if want == "int" || want == "float" {
			return nil
		}
	case star.Float:
		if want == "float" {
			return nil
		}
	case *star.List, star.Tuple:
		if want == "list of strings" {
			iter := star.Iterate(v)
			defer iter.Done()
			var x star.Value
			for iter.Next(&x) {
				if _, ok := x.(star.String); !ok {
					return fmt.Errorf("want a list of strings, got an item of type %s", x.Type())
				}
			}
			return nil
		}
	}
	return fmt.Errorf("want %s, got %s", want, v.Type())
}

func keywordNames(params []mainParam) string {
	if len(params) == 0 {
		return "no parameters"
	}
	var ns []string
	for _, p := range params {
		ns = append(ns, p.name)
	}
	return strings.Join(ns, ", ")
}

// syntaxIn is the "in" operator token.
const syntaxIn = syntax.IN
