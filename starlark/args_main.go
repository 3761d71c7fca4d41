// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/internal/scrub"
)

// mainParam is one parameter of main after ctx; its default's type is the
// type of the command-line value.
type mainParam struct {
	name string
	def  star.Value // nil: required
}

func (p mainParam) typeName() string {
	switch p.def.(type) {
	case nil, star.NoneType, star.String:
		return "string"
	case star.Bool:
		return "bool"
	case star.Int:
		return "int"
	case star.Float:
		return "float"
	case *star.List, star.Tuple:
		return "list of strings"
	case *secretParam:
		return "secret"
	}
	return p.def.Type()
}

// mainParams lists main's parameters after the first (ctx).
func mainParams(fn *star.Function) []mainParam {
	n := fn.NumParams()
	if fn.HasVarargs() {
		n--
	}
	if fn.HasKwargs() {
		n--
	}
	var out []mainParam
	for i := 1; i < n; i++ {
		name, _ := fn.Param(i)
		out = append(out, mainParam{name: name, def: fn.ParamDefault(i)})
	}
	return out
}

// mainHelp renders -- --help: the docstring, then the parameters.
func mainHelp(file string, fn *star.Function, params []mainParam) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: podmin run %s -- [--key=value ...]\n\n", file)
	if doc := cleanDoc(fn.Doc()); doc != "" {
		b.WriteString(doc + "\n\n")
	}
	b.WriteString("parameters:\n")
	if len(params) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, p := range params {
		flag := "--" + strings.ReplaceAll(p.name, "_", "-")
		switch {
		case p.required():
			fmt.Fprintf(&b, "  %-24s %s (required)\n", flag, p.typeName())
		case isSecretParam(p):
			fmt.Fprintf(&b, "  %-24s %s (optional; None when not given)\n", flag, p.typeName())
		default:
			fmt.Fprintf(&b, "  %-24s %s (default %s)\n", flag, p.typeName(), p.def)
		}
	}
	return b.String()
}

// parseArgs converts --key=value, --key value and bare --flag (bools)
// into keyword arguments typed by each parameter's default. Lists collect
// repeated flags. A parameter without a default is required. The value of
// a secret parameter is registered with reg as soon as it is read.
func parseArgs(reg *scrub.Registry, params []mainParam, anyKwargs bool, args []string) ([]star.Tuple, error) {
	byName := map[string]mainParam{}
	for _, p := range params {
		byName[p.name] = p
	}
	got := map[string]star.Value{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") || len(a) == 2 {
			return nil, fmt.Errorf("unexpected argument %s: pass parameters as --key=value", scrub.Quote(a))
		}
		key, val, hasVal := strings.Cut(a[2:], "=")
		name := strings.ReplaceAll(key, "-", "_")
		p, ok := byName[name]
		if !ok && !anyKwargs {
			return nil, fmt.Errorf("unknown parameter %s: main takes %s", scrub.Quote("--"+key), paramNames(params))
		}
		if !ok {
			p = mainParam{name: name, def: star.String("")}
		}
		if _, isBool := p.def.(star.Bool); isBool && !hasVal {
			val, hasVal = "true", true
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("--%s needs a value", key)
			}
			i++
			val = args[i]
		}
		var secret star.Value
		if isSecretParam(p) {
			secret = secretArg(reg, p, val)
		}
		if _, repeated := got[name]; repeated && !isList(p.def) {
			return nil, fmt.Errorf("--%s is given twice: it takes one %s; give it once, or make its default a list to take several", key, p.typeName())
		}
		if secret != nil {
			got[name] = secret
			continue
		}
		v, err := convertArg(p, val, got[name])
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", key, err)
		}
		got[name] = v
	}
	for _, kv := range omittedSecrets(params, func(n string) bool { return got[n] != nil }) {
		got[string(kv[0].(star.String))] = kv[1]
	}
	var missing []string
	for _, p := range params {
		if p.required() && got[p.name] == nil {
			missing = append(missing, "--"+strings.ReplaceAll(p.name, "_", "-"))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing required parameter(s) %s", strings.Join(missing, ", "))
	}
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]star.Tuple, len(names))
	for i, n := range names {
		out[i] = star.Tuple{star.String(n), got[n]}
	}
	return out, nil
}

func paramNames(params []mainParam) string {
	if len(params) == 0 {
		return "no parameters"
	}
	var ns []string
	for _, p := range params {
		ns = append(ns, "--"+strings.ReplaceAll(p.name, "_", "-"))
	}
	return strings.Join(ns, ", ")
}

func convertArg(p mainParam, s string, prev star.Value) (star.Value, error) {
	switch p.def.(type) {
	case star.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("want true or false, got %s", scrub.Quote(s))
		}
		return star.Bool(b), nil
	case star.Int:
		n, err := strconv.ParseInt(s, 10, 64)
		if errors.Is(err, strconv.ErrRange) {
			return nil, fmt.Errorf("%s is out of range: want an integer from %d to %d", scrub.Quote(s), int64(math.MinInt64), int64(math.MaxInt64))
		}
		if err != nil {
			return nil, fmt.Errorf("want an integer, got %s", scrub.Quote(s))
		}
		return star.MakeInt64(n), nil
	case star.Float:
		f, err := strconv.ParseFloat(s, 64)
		if errors.Is(err, strconv.ErrRange) {
			return nil, fmt.Errorf("%s is out of range: want a finite number of at most about 1.8e308", scrub.Quote(s))
		}
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("want a finite number such as 0.5 or 2, got %s", scrub.Quote(s))
		}
		return star.Float(f), nil
	case *star.List, star.Tuple:
		var items []star.Value
		if l, ok := prev.(*star.List); ok {
			for i := 0; i < l.Len(); i++ {
				items = append(items, l.Index(i))
			}
		}
		return star.NewList(append(items, star.String(s))), nil
	}
	return star.String(s), nil
}

func isList(v star.Value) bool {
	switch v.(type) {
	case *star.List, star.Tuple:
		return true
	}
	return false
}

// cleanDoc is a docstring as Python's inspect.cleandoc shows it: the
// first line stripped, the indentation the other lines share removed,
// and blank lines at both ends dropped.
func cleanDoc(doc string) string {
	lines := strings.Split(strings.ReplaceAll(doc, "\t", "    "), "\n")
	indent := -1
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, " ")); indent < 0 || n < indent {
			indent = n
		}
	}
	lines[0] = strings.TrimSpace(lines[0])
	for i := 1; i < len(lines); i++ {
		if len(lines[i]) >= indent && indent > 0 {
			lines[i] = lines[i][indent:]
		}
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return strings.Trim(strings.Join(lines, "\n"), "\n")
}
