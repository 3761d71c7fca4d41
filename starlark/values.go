// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"fmt"
	"sort"

	star "go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// constructor names a result struct so that it prints as
// deployment(name = "web", ...) rather than struct(...).
type constructor string

func (c constructor) String() string        { return string(c) }
func (c constructor) Type() string          { return "constructor" }
func (c constructor) Freeze()               {}
func (c constructor) Truth() star.Bool      { return true }
func (c constructor) Hash() (uint32, error) { return star.String(c).Hash() }

// field is one named value of a result struct.
type field struct {
	name  string
	value star.Value
}

// result builds a frozen struct with a named constructor.
func result(ctor string, fields ...field) *starlarkstruct.Struct {
	d := make(star.StringDict, len(fields))
	for _, f := range fields {
		d[f.name] = f.value
	}
	s := starlarkstruct.FromStringDict(constructor(ctor), d)
	s.Freeze()
	return s
}

func str(name, v string) field              { return field{name, star.String(v)} }
func boolean(name string, v bool) field     { return field{name, star.Bool(v)} }
func value(name string, v star.Value) field { return field{name, v} }

// strings converts a Go slice to a frozen list, in the given order (callers
// pass sorted data).
func stringList(items []string) *star.List {
	vs := make([]star.Value, len(items))
	for i, s := range items {
		vs[i] = star.String(s)
	}
	l := star.NewList(vs)
	l.Freeze()
	return l
}

// frozenList freezes a list of values.
func frozenList(vs []star.Value) *star.List {
	l := star.NewList(vs)
	l.Freeze()
	return l
}

// toStarlark converts plain Go data (from JSON-like values) to frozen
// Starlark values with sorted dict keys.
func toStarlark(v any) star.Value {
	switch v := v.(type) {
	case nil:
		return star.None
	case string:
		return star.String(v)
	case bool:
		return star.Bool(v)
	case int:
		return star.MakeInt(v)
	case int64:
		return star.MakeInt64(v)
	case float64:
		if v == float64(int64(v)) {
			return star.MakeInt64(int64(v))
		}
		return star.Float(v)
	case []any:
		vs := make([]star.Value, len(v))
		for i, x := range v {
			vs[i] = toStarlark(x)
		}
		return frozenList(vs)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := star.NewDict(len(keys))
		for _, k := range keys {
			_ = d.SetKey(star.String(k), toStarlark(v[k]))
		}
		d.Freeze()
		return d
	}
	return star.String(fmt.Sprint(v))
}
