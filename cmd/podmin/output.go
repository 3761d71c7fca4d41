// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/internal/scrub"
	pstar "podmin.dev/podmin/starlark"
)

var outputFormats = []string{"table", "json", "yaml"}

// addOutputFlag adds -o/--output to a command whose result is data.
// An unknown format is a usage error found while the flags are parsed.
func addOutputFlag(cmd *cobra.Command, out *string) {
	cmd.Flags().VarP(newEnumValue(out, "table", "output format", outputFormats...), "output", "o", "output format: "+orList(outputFormats))
}

// printResult writes v as JSON or YAML with every field present (see
// marshalFull), or calls table for the human form.
func printResult(w io.Writer, format string, v any, table func(io.Writer) error) error {
	switch format {
	case "json":
		b, err := marshalFull(v)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
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
	case "table", "":
		return table(w)
	}
	return usageError{fmt.Errorf("unknown output format %s: use one of %q", scrub.Quote(format), outputFormats)}
}

// checkOutput rejects an unknown -o value before any work is done.
func checkOutput(format string) error {
	if !slices.Contains(outputFormats, format) {
		return usageError{fmt.Errorf("unknown output format %s: use one of %q", scrub.Quote(format), outputFormats)}
	}
	return nil
}

// writePlan writes a dry-run plan as a table, JSON or YAML (the JSON
// document converted, so both carry the same fields).
func writePlan(w io.Writer, plan *pstar.Plan, format string) error {
	if format != "yaml" {
		return plan.Write(w, format)
	}
	var buf bytes.Buffer
	if err := plan.Write(&buf, "json"); err != nil {
		return err
	}
	b, err := yaml.JSONToYAML(buf.Bytes())
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
