// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"fmt"
	"sort"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/internal/scrub"
)

// strList unpacks a repeatable flag: a list or tuple of strings, or one
// string.
type strList []string

var _ star.Unpacker = (*strList)(nil)

func (l *strList) Unpack(v star.Value) error {
	if s, ok := star.AsString(v); ok {
		*l = []string{s}
		return nil
	}
	it, ok := v.(star.Iterable)
	if !ok {
		return fmt.Errorf("got %s, want list of str", v.Type())
	}
	if _, isDict := v.(*star.Dict); isDict {
		return fmt.Errorf("got dict, want list of str")
	}
	iter := it.Iterate()
	defer iter.Done()
	var x star.Value
	var out []string
	for i := 0; iter.Next(&x); i++ {
		s, ok := star.AsString(x)
		if !ok {
			return fmt.Errorf("element %d is %s, want str", i, x.Type())
		}
		out = append(out, s)
	}
	*l = out
	return nil
}

// kvList unpacks a repeatable K=V flag: what strList accepts, or a dict
// {K: V} rendered as sorted "K=V" entries. image= uses it with
// {container: reference}.
type kvList []string

var _ star.Unpacker = (*kvList)(nil)

func (l *kvList) Unpack(v star.Value) error {
	d, ok := v.(*star.Dict)
	if !ok {
		return (*strList)(l).Unpack(v)
	}
	out := make([]string, 0, d.Len())
	for _, item := range d.Items() {
		k, ok := star.AsString(item[0])
		if !ok {
			return fmt.Errorf("dict key %s is %s, want str", item[0], item[0].Type())
		}
		val, ok := star.AsString(item[1])
		if !ok {
			return fmt.Errorf("value of %s is %s, want str", scrub.Quote(k), item[1].Type())
		}
		out = append(out, k+"="+val)
	}
	sort.Strings(out)
	*l = out
	return nil
}
