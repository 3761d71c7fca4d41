// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

var outputFormats = []string{"table", "json", "yaml"}

// addOutputFlag adds -o/--output to a command whose result is data.
func addOutputFlag(cmd *cobra.Command, out *string) {
	cmd.Flags().StringVarP(out, "output", "o", "table", "output format: table, json or yaml")
}

// printResult writes v as JSON or YAML, or calls table for the human form.
func printResult(w io.Writer, format string, v any, table func(io.Writer) error) error {
	switch format {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "table", "":
		return table(w)
	}
	return usageError{fmt.Errorf("unknown output format %q: use one of %q", format, outputFormats)}
}

// checkOutput rejects an unknown -o value before any work is done.
func checkOutput(format string) error {
	if !slices.Contains(outputFormats, format) {
		return usageError{fmt.Errorf("unknown output format %q: use one of %q", format, outputFormats)}
	}
	return nil
}
