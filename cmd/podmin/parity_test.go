// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"podmin.dev/podmin/builtins"
	pstar "podmin.dev/podmin/starlark"
)

// The exemptions from CLI ↔ Starlark parity, in one place, each with its
// reason. Everything not listed here must match exactly.
var (
	parityExemptCommands = map[string]string{
		"run":        "runs Starlark itself: the host, not an operation",
		"test":       "runs Starlark tests: the host, not an operation",
		"repl":       "interactive Starlark: the host, not an operation",
		"starlark":   "a help topic, not a command",
		"recipes":    "manages the recipe lock file: the host, not an operation",
		"help":       "Cobra's help",
		"completion": "Cobra's shell completion scripts",
	}
	parityExemptFlags = map[string]string{
		"output":  "formats the CLI's printed result; Starlark returns values",
		"help":    "Cobra's --help",
		"stdin":   "a script has no standard input to read a secret from: it passes value= (or file=)",
		"yes":     "scripts confirm a destructive call with confirm=<cluster>, or the whole run with podmin run --yes",
		"watch":   "status --watch redraws a terminal for people; a recipe gates on podmin.deployments.wait (status --wait)",
		"dry-run": "a recipe is dry-run as a whole with podmin run --dry-run, which records every built-in it calls; a per-call dry_run would mix real and recorded writes in one script",
	}
	// parityRenamedFlags maps flags whose name is a Starlark keyword to the
	// parameter that stands for them.
	parityRenamedFlags = map[string]string{
		"for": "for_", // "for" is reserved in Starlark; for_ follows Python's convention
	}
	parityExemptBuiltins = map[string]string{
		"contexts.current": "Starlark-only accessor: the CLI shows the current context in \"podmin use\"",
		"deployments.get":  "Starlark-only lookup built on list, for expected absence via default=",
		"deployments.wait": "the gate of status --wait and deploy --wait as a call of its own: until is --wait's value, timeout the command's --timeout",
		"secret":           "Starlark-only constructor of an opaque secret value: the CLI reads values from a prompt, --stdin or --file",
		"secrets.read":     "Starlark-only: a script receives an opaque secret; the CLI never prints a value",
		"secret_param":     "Starlark-only: marks a parameter of main as a secret; the CLI passes it as -- --NAME=VALUE to podmin run",
	}
	parityExemptKeywords = map[string]string{
		"default":     "Starlark-only: expected absence returns default instead of failing",
		"confirm":     "Starlark-only: scripts never prompt, so destructive calls pass confirm = True or the cluster (the CLI prompts or takes --yes); the destructive-guard parity is checked separately",
		"value":       "Starlark-only: a script passes a secret's value directly (the CLI prompts, or reads --stdin/--file)",
		"destination": "push's optional second argument DESTINATION, passed by keyword in Starlark",
		"persist":     "Starlark-only: a recipe's contexts.use lasts for its run unless persist = True; \"podmin use CLUSTER\" always persists (one command selects with --context)",
	}
)

// checkParity compares the command tree with the podmin module and
// reports every command without a builtin, builtin without a command, and
// flag/keyword or subject mismatch.
func checkParity(root *cobra.Command, reg []*pstar.Builtin) error {
	var problems []string
	byCommand := map[string][]*pstar.Builtin{}
	for _, b := range reg {
		if _, ok := parityExemptBuiltins[b.Name]; ok {
			continue
		}
		if b.Command == "" {
			problems = append(problems, fmt.Sprintf("builtin %s names no command and is not exempt", b.FullName()))
			continue
		}
		byCommand[b.Command] = append(byCommand[b.Command], b)
	}
	seen := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			path := strings.TrimPrefix(sub.CommandPath(), root.Name()+" ")
			first, _, _ := strings.Cut(path, " ")
			if _, ok := parityExemptCommands[first]; ok {
				continue
			}
			if sub.HasSubCommands() {
				walk(sub) // a command group: its subcommands are the operations
				continue
			}
			if !sub.Runnable() {
				continue
			}
			seen[path] = true
			bs := byCommand[path]
			if len(bs) == 0 {
				problems = append(problems, fmt.Sprintf("command %q has no Starlark builtin", path))
				continue
			}
			flags := flagNames(sub)
			subject := subjectOf(sub)
			for _, b := range bs {
				keywords := map[string]bool{}
				for _, k := range b.Keywords() {
					if _, ok := parityExemptKeywords[k]; !ok {
						keywords[k] = true
					}
				}
				for _, f := range sortedKeys(flags) {
					if !keywords[f] {
						problems = append(problems, fmt.Sprintf("flag --%s of %q has no keyword %s in %s", strings.ReplaceAll(f, "_", "-"), path, f, b.FullName()))
					}
				}
				for _, k := range sortedKeys(keywords) {
					if !flags[k] {
						problems = append(problems, fmt.Sprintf("keyword %s of %s has no flag --%s in %q", k, b.FullName(), strings.ReplaceAll(k, "_", "-"), path))
					}
				}
				if p := b.Positional(); p != "" && p != subject {
					problems = append(problems, fmt.Sprintf("subject %s of %s differs from %q's argument %q", p, b.FullName(), path, strings.ToUpper(subject)))
				}
			}
		}
	}
	walk(root)
	for _, cmd := range sortedKeys(byCommand) {
		if !seen[cmd] {
			for _, b := range byCommand[cmd] {
				problems = append(problems, fmt.Sprintf("builtin %s has no command %q", b.FullName(), cmd))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New("CLI and Starlark differ:\n  " + strings.Join(problems, "\n  "))
}

// flagNames are a command's own flags with "-" → "_", minus exemptions.
func flagNames(c *cobra.Command) map[string]bool {
	out := map[string]bool{}
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if _, ok := parityExemptFlags[f.Name]; ok {
			return
		}
		if k, ok := parityRenamedFlags[f.Name]; ok {
			out[k] = true
			return
		}
		out[strings.ReplaceAll(f.Name, "-", "_")] = true
	})
	return out
}

// subjectOf returns the lower-cased first argument word of a command's
// Use line ("deploy NAME -g ..." → "name").
func subjectOf(c *cobra.Command) string {
	fields := strings.Fields(c.Use)
	if len(fields) < 2 {
		return ""
	}
	w := strings.Trim(fields[1], "[].")
	if w == "" || strings.HasPrefix(w, "-") || w != strings.ToUpper(w) {
		return ""
	}
	return strings.ToLower(w)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestParity(t *testing.T) {
	if err := checkParity(newRoot(&builtins.Env{}), pstar.Builtins()); err != nil {
		t.Fatal(err)
	}
}

// replaceCommand swaps a command of a fresh tree for a copy whose flags
// pass through rename.
func replaceCommand(t *testing.T, root *cobra.Command, name string, rename func(string) string) {
	t.Helper()
	for _, c := range root.Commands() {
		if c.Name() != name {
			continue
		}
		cp := &cobra.Command{Use: c.Use, RunE: c.RunE}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			nf := *f
			nf.Name = rename(f.Name)
			cp.Flags().AddFlag(&nf)
		})
		root.RemoveCommand(c)
		root.AddCommand(cp)
		return
	}
	t.Fatalf("no command %q", name)
}

func TestParityDetectsDrift(t *testing.T) {
	renameKeyword := func(reg []*pstar.Builtin, builtin, from, to string) []*pstar.Builtin {
		out := make([]*pstar.Builtin, len(reg))
		for i, b := range reg {
			cp := *b
			cp.Params = append([]pstar.Param(nil), b.Params...)
			for j := range cp.Params {
				if cp.Name == builtin && cp.Params[j].Name == from {
					cp.Params[j].Name = to
				}
			}
			out[i] = &cp
		}
		return out
	}
	cases := []struct {
		name   string
		mutate func(root *cobra.Command, reg []*pstar.Builtin) []*pstar.Builtin
		want   []string
	}{
		{"flag renamed on the CLI side", func(root *cobra.Command, reg []*pstar.Builtin) []*pstar.Builtin {
			replaceCommand(t, root, "delete", func(n string) string {
				if n == "ignore-not-found" {
					return "ignore-missing"
				}
				return n
			})
			return reg
		}, []string{`flag --ignore-missing of "delete" has no keyword ignore_missing in podmin.deployments.delete`,
			`keyword ignore_not_found of podmin.deployments.delete has no flag --ignore-not-found in "delete"`}},
		{"keyword renamed on the Starlark side", func(_ *cobra.Command, reg []*pstar.Builtin) []*pstar.Builtin {
			return renameKeyword(reg, "deployments.deploy", "namespace", "ns")
		}, []string{`flag --namespace of "deploy" has no keyword namespace in podmin.deployments.deploy`,
			`keyword ns of podmin.deployments.deploy has no flag --ns in "deploy"`}},
		{"subject renamed", func(_ *cobra.Command, reg []*pstar.Builtin) []*pstar.Builtin {
			return renameKeyword(reg, "contexts.connect", "cluster", "name")
		}, []string{`subject name of podmin.contexts.connect differs from "connect"'s argument "CLUSTER"`}},
		{"secret flag renamed", func(root *cobra.Command, reg []*pstar.Builtin) []*pstar.Builtin {
			for _, c := range root.Commands() {
				if c.Name() == "secret" {
					replaceCommand(t, c, "list", func(n string) string {
						if n == "system" {
							return "system-keys"
						}
						return n
					})
				}
			}
			return reg
		}, []string{`flag --system-keys of "secret list" has no keyword system_keys in podmin.secrets.list`}},
		{"command without builtin", func(root *cobra.Command, reg []*pstar.Builtin) []*pstar.Builtin {
			root.AddCommand(&cobra.Command{Use: "frobnicate", RunE: func(*cobra.Command, []string) error { return nil }})
			return reg
		}, []string{`command "frobnicate" has no Starlark builtin`}},
		{"builtin without command", func(root *cobra.Command, reg []*pstar.Builtin) []*pstar.Builtin {
			for _, c := range root.Commands() {
				if c.Name() == "list" {
					root.RemoveCommand(c)
				}
			}
			return reg
		}, []string{`builtin podmin.deployments.list has no command "list"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := newRoot(&builtins.Env{})
			reg := tc.mutate(root, pstar.Builtins())
			err := checkParity(root, reg)
			if err == nil {
				t.Fatal("parity check passed on a mutated copy")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			// The original tree is untouched.
			if err := checkParity(newRoot(&builtins.Env{}), pstar.Builtins()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
