// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/theory/jsonpath"
	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/scrub"
	pstar "podmin.dev/podmin/starlark"
)

// outputFormats are the -o values; "jsonpath=" takes an expression after
// the "=".
var outputFormats = []string{"table", "json", "yaml", "name", "jsonpath="}

const jsonpathPrefix = "jsonpath="

// outputHelp lists the formats the way the help and errors name them.
const outputHelp = "table, json, yaml, name or jsonpath=EXPR"

// outputValue is the -o flag. A bad value, a JSONPath expression that
// does not parse, and -o name on a command whose result names no items
// all fail while the flags are parsed: bad usage (exit 2) before anything
// runs.
type outputValue struct {
	p   *string
	cmd *cobra.Command
}

func (o *outputValue) String() string { return *o.p }

// Allowed lists the formats every command's -o takes (name only where the
// result names items; jsonpath= with an expression), which a synopsis
// "-o table|json|yaml" names.
func (o *outputValue) Allowed() []string { return []string{"table", "json", "yaml"} }

// completions are the -o values the command at path takes.
func outputCompletions(path string) []string {
	if namesItems(path) {
		return outputFormats
	}
	return slices.DeleteFunc(slices.Clone(outputFormats), func(f string) bool { return f == "name" })
}
func (o *outputValue) Type() string { return "format" }

func (o *outputValue) Set(v string) error {
	if err := checkOutput(v); err != nil {
		return err
	}
	if v == "name" && !namesItems(o.cmd.CommandPath()) {
		return fmt.Errorf("-o name prints one KIND/NAME line per item of a list, and %q prints a result without item names: use -o table, json, yaml or jsonpath=EXPR", o.cmd.CommandPath())
	}
	*o.p = v
	return nil
}

// addOutputFlag adds -o/--output to a command whose result is data.
// An unknown format is a usage error found while the flags are parsed.
func addOutputFlag(cmd *cobra.Command, out *string) {
	*out = "table"
	cmd.Flags().VarP(&outputValue{p: out, cmd: cmd}, "output", "o", "output format: "+outputHelp+
		" (a JSONPath of RFC 9535 such as '$.items[*].name', or kubectl's '{.items[*].name}'; strings print one per line)")
}

// printResult writes v as JSON or YAML with every field present (see
// marshalFull), the values a JSONPath selects from that JSON, the names
// of its items, or calls table for the human form.
func printResult(w io.Writer, format string, v any, table func(io.Writer) error) error {
	switch {
	case format == "json":
		b, err := marshalFull(v)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case format == "yaml":
		// The same document as JSON, so both carry every field.
		b, err := marshalFull(v)
		if err != nil {
			return err
		}
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case format == "name":
		return printNames(w, v)
	case strings.HasPrefix(format, jsonpathPrefix):
		b, err := marshalFull(v)
		if err != nil {
			return err
		}
		return printJSONPath(w, strings.TrimPrefix(format, jsonpathPrefix), b)
	case format == "table" || format == "":
		return table(w)
	}
	return usageError{fmt.Errorf("unknown output format %s: use %s", scrub.Quote(format), outputHelp)}
}

// checkOutput rejects an unknown -o value, or a JSONPath expression that
// does not parse, before any work is done.
func checkOutput(format string) error {
	if expr, ok := strings.CutPrefix(format, jsonpathPrefix); ok {
		_, err := parseJSONPath(expr)
		return err
	}
	if format == "jsonpath" {
		return usageError{errors.New("-o jsonpath needs an expression: -o jsonpath='{.items[*].name}' or -o jsonpath='$.items[*].name'")}
	}
	if !slices.Contains(outputFormats, format) {
		return usageError{fmt.Errorf("unknown output format %s: use %s", scrub.Quote(format), outputHelp)}
	}
	return nil
}

// writePlan writes a dry-run plan as a table, JSON, YAML (the JSON
// document converted, so both carry the same fields) or what a JSONPath
// selects from the JSON.
func writePlan(w io.Writer, plan *pstar.Plan, format string) error {
	if format != "yaml" && !strings.HasPrefix(format, jsonpathPrefix) {
		return plan.Write(w, format)
	}
	var buf bytes.Buffer
	if err := plan.Write(&buf, "json"); err != nil {
		return err
	}
	if expr, ok := strings.CutPrefix(format, jsonpathPrefix); ok {
		return printJSONPath(w, expr, buf.Bytes())
	}
	b, err := yaml.JSONToYAML(buf.Bytes())
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// parseJSONPath parses an RFC 9535 expression ("$.items[*].name") or
// kubectl's form of one ("{.items[*].name}"), translated to RFC 9535.
func parseJSONPath(expr string) (*jsonpath.Path, error) {
	q := strings.TrimSpace(expr)
	if strings.HasPrefix(q, "{") {
		inner, ok := strings.CutSuffix(q[1:], "}")
		if !ok || strings.ContainsAny(inner, "{}") {
			return nil, usageError{fmt.Errorf("-o jsonpath=%s: give one expression, '{.a.b}' or '$.a.b' (kubectl's templates of several {…} and text are not supported)", scrub.Quote(expr))}
		}
		switch q = strings.TrimSpace(inner); {
		case q == "" || q == ".":
			q = "$"
		case strings.HasPrefix(q, "$"):
		case strings.HasPrefix(q, ".") || strings.HasPrefix(q, "["):
			q = "$" + q
		default:
			q = "$." + q
		}
	}
	if q == "" {
		return nil, usageError{errors.New("-o jsonpath needs an expression: -o jsonpath='{.items[*].name}' or -o jsonpath='$.items[*].name'")}
	}
	p, err := jsonpath.Parse(q)
	if err != nil {
		return nil, usageError{fmt.Errorf("-o jsonpath=%s: %w: write an RFC 9535 path such as '$.items[*].name' (or kubectl's '{.items[*].name}')", scrub.Quote(expr), err)}
	}
	return p, nil
}

// printJSONPath prints what expr selects from doc: each string on a line
// of its own, unquoted; numbers, booleans and null as JSON literals; and
// objects and arrays as one line of JSON. A path to one value (no
// wildcard, slice, filter or descendant) that selects nothing names a
// field the result does not have: that is an error, never empty output.
func printJSONPath(w io.Writer, expr string, doc []byte) error {
	p, err := parseJSONPath(expr)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber() // digests, sizes and counts print exactly as in -o json
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("decode the result for -o jsonpath: %w (a Podmin bug)", err)
	}
	nodes := p.Select(v)
	if len(nodes) == 0 && p.Query().Singular() != nil {
		return fmt.Errorf("-o jsonpath=%s selected nothing: the result has no such field; see its fields with -o json", expr)
	}
	var buf bytes.Buffer
	for _, n := range nodes {
		switch n := n.(type) {
		case string:
			buf.WriteString(n)
		case json.Number:
			buf.WriteString(n.String())
		default:
			b, err := json.Marshal(n)
			if err != nil {
				return err
			}
			buf.Write(b)
		}
		buf.WriteByte('\n')
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// itemNames says, for one result type, where its items are (a JSONPath
// into its JSON document), their kind, and the fields whose values,
// joined with "/", name each item.
type itemNames struct {
	command string // the command path that prints it
	typ     reflect.Type
	kind    string
	items   string
	fields  []string
}

// namedResults are the results -o name prints; a command printing a
// result that is not listed refuses -o name while its flags are parsed.
var namedResults = []itemNames{
	{"podmin use", reflect.TypeFor[[]builtins.ContextEntry](), "context", "$[*]", []string{"cluster"}},
	{"podmin use", reflect.TypeFor[contexts.Context](), "context", "$", []string{"cluster"}},
	{"podmin list", reflect.TypeFor[[]builtins.ListEntry](), "deployment", "$[*]", []string{"nodegroup", "name"}},
	{"podmin list", reflect.TypeFor[indexMissing](), "deployment", "$.deployments[*]", []string{"nodegroup", "name"}},
	{"podmin status", reflect.TypeFor[builtins.StatusResult](), "deployment", "$.nodegroups[*].deployments[*]", []string{"nodegroup", "name"}},
	{"podmin deploy", reflect.TypeFor[builtins.DeployResult](), "deployment", "$", []string{"nodegroup", "name"}},
	{"podmin delete", reflect.TypeFor[builtins.DeleteResult](), "deployment", "$", []string{"nodegroup", "name"}},
	{"podmin install cloudflared", reflect.TypeFor[builtins.InstallResult](), "deployment", "$", []string{"nodegroup", "name"}},
	{"podmin uninstall cloudflared", reflect.TypeFor[builtins.DeleteResult](), "deployment", "$", []string{"nodegroup", "name"}},
	{"podmin index rebuild", reflect.TypeFor[builtins.IndexRebuildResult](), "deployment", "$.entries[*]", []string{"deployment"}},
	{"podmin preview", reflect.TypeFor[builtins.PreviewResult](), "file", "$.files[*]", []string{"file"}},
	{"podmin secret list", reflect.TypeFor[builtins.SecretList](), "secret", "$.secrets[*]", []string{"name"}},
}

// namesItems says whether the command at path prints a result with names.
func namesItems(path string) bool {
	return slices.ContainsFunc(namedResults, func(n itemNames) bool { return n.command == path })
}

// printNames prints one KIND/NAME line per item of v.
func printNames(w io.Writer, v any) error {
	i := slices.IndexFunc(namedResults, func(n itemNames) bool { return n.typ == reflect.TypeOf(v) })
	if i < 0 {
		return usageError{fmt.Errorf("-o name: this result (%T) names no items: use -o table, json, yaml or jsonpath=EXPR", v)}
	}
	spec := namedResults[i]
	doc, err := marshalFull(v)
	if err != nil {
		return err
	}
	var whole any
	if err := json.Unmarshal(doc, &whole); err != nil {
		return fmt.Errorf("decode the result for -o name: %w (a Podmin bug)", err)
	}
	var buf bytes.Buffer
	for _, item := range jsonpath.MustParse(spec.items).Select(whole) {
		obj, _ := item.(map[string]any)
		parts := make([]string, 0, len(spec.fields))
		for _, f := range spec.fields {
			s, ok := obj[f].(string)
			if !ok || s == "" {
				return fmt.Errorf("-o name: an item of %T has no %s (a Podmin bug): use -o json", v, f)
			}
			parts = append(parts, s)
		}
		fmt.Fprintf(&buf, "%s/%s\n", spec.kind, strings.Join(parts, "/"))
	}
	_, err = w.Write(buf.Bytes())
	return err
}
