// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package userdata

import (
	"bytes"
	"fmt"
	"strconv"
	"text/template/parse"
)

// execute renders the Go template text over data with the part of the
// template language the bootstrap scripts use:
//
//	{{.Name}}                  a key of data (a missing key is an error)
//	{{range .List}}{{.}}{{end}} each element of a []string, with an {{else}}
//	{{if .Name}}…{{else}}…{{end}} a bool, or a non-empty string or list
//
// with the usual "{{-" and "-}}" trimming. Anything else (functions,
// pipelines, variables, nested fields, with, define) is refused with the
// template position, so a template change that needs more fails its tests
// instead of rendering wrongly.
//
// It does not use text/template's executor on purpose: that one calls
// methods by name through reflection, and a program that can reach it
// keeps every exported method of every type it links (the AWS SDK
// clients' hundreds of unused operations, tens of megabytes of the CLI).
func execute(buf *bytes.Buffer, name, text string, data map[string]any) error {
	trees, err := parse.Parse(name, text, "", "")
	if err != nil {
		return err
	}
	tree := trees[name]
	if tree == nil || len(trees) != 1 {
		return fmt.Errorf("%s: {{define}} and {{block}} are not supported by the user-data renderer", name)
	}
	x := executor{tree: tree, w: buf}
	return x.list(tree.Root, data, data)
}

type executor struct {
	tree *parse.Tree
	w    *bytes.Buffer
}

// unsupported names the construct at n and where it is.
func (x *executor) unsupported(n parse.Node) error {
	loc, _ := x.tree.ErrorContext(n)
	return fmt.Errorf("%s: %s is not supported by the user-data renderer (fields, range and if only)", loc, n)
}

func (x *executor) list(l *parse.ListNode, top map[string]any, dot any) error {
	if l == nil {
		return nil
	}
	for _, n := range l.Nodes {
		if err := x.node(n, top, dot); err != nil {
			return err
		}
	}
	return nil
}

func (x *executor) node(n parse.Node, top map[string]any, dot any) error {
	switch n := n.(type) {
	case *parse.TextNode:
		x.w.Write(n.Text)
		return nil
	case *parse.ActionNode:
		v, err := x.pipe(n, n.Pipe, dot)
		if err != nil {
			return err
		}
		return x.print(n, v)
	case *parse.RangeNode:
		v, err := x.pipe(n, n.Pipe, dot)
		if err != nil {
			return err
		}
		items, ok := v.([]string)
		if !ok {
			loc, _ := x.tree.ErrorContext(n)
			return fmt.Errorf("%s: range over %T: the user-data renderer ranges over []string only", loc, v)
		}
		for _, item := range items {
			if err := x.list(n.List, top, item); err != nil {
				return err
			}
		}
		if len(items) == 0 {
			return x.list(n.ElseList, top, dot)
		}
		return nil
	case *parse.IfNode:
		v, err := x.pipe(n, n.Pipe, dot)
		if err != nil {
			return err
		}
		truth, err := x.truth(n, v)
		if err != nil {
			return err
		}
		if truth {
			return x.list(n.List, top, dot)
		}
		return x.list(n.ElseList, top, dot)
	}
	return x.unsupported(n)
}

// pipe evaluates a pipeline that is one field of dot or dot itself.
func (x *executor) pipe(at parse.Node, p *parse.PipeNode, dot any) (any, error) {
	if p == nil || len(p.Decl) != 0 || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return nil, x.unsupported(at)
	}
	switch a := p.Cmds[0].Args[0].(type) {
	case *parse.DotNode:
		return dot, nil
	case *parse.FieldNode:
		if len(a.Ident) != 1 {
			return nil, x.unsupported(at)
		}
		m, ok := dot.(map[string]any)
		if !ok {
			loc, _ := x.tree.ErrorContext(at)
			return nil, fmt.Errorf("%s: can't evaluate field %s in type %T", loc, a.Ident[0], dot)
		}
		v, ok := m[a.Ident[0]]
		if !ok {
			loc, _ := x.tree.ErrorContext(at)
			return nil, fmt.Errorf("%s: map has no entry for key %q", loc, a.Ident[0])
		}
		return v, nil
	}
	return nil, x.unsupported(at)
}

// print writes v as text/template would.
func (x *executor) print(at parse.Node, v any) error {
	switch v := v.(type) {
	case string:
		x.w.WriteString(v)
	case bool:
		x.w.WriteString(strconv.FormatBool(v))
	case int:
		x.w.WriteString(strconv.Itoa(v))
	default:
		loc, _ := x.tree.ErrorContext(at)
		return fmt.Errorf("%s: cannot print a %T: the user-data renderer prints strings, bools and ints", loc, v)
	}
	return nil
}

func (x *executor) truth(at parse.Node, v any) (bool, error) {
	switch v := v.(type) {
	case bool:
		return v, nil
	case string:
		return v != "", nil
	case []string:
		return len(v) > 0, nil
	case int:
		return v != 0, nil
	}
	loc, _ := x.tree.ErrorContext(at)
	return false, fmt.Errorf("%s: cannot test a %T: the user-data renderer tests bools, strings, ints and lists", loc, v)
}
