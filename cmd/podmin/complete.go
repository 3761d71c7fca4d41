// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/contexts"
)

// completionTimeout bounds a completion that reads the bucket, so a slow
// or unreachable one never hangs the shell.
const completionTimeout = 2 * time.Second

// isCompletion reports whether cmd is Cobra's hidden completion request
// command, which must work with no context at all.
func isCompletion(cmd *cobra.Command) bool {
	return cmd.Name() == cobra.ShellCompRequestCmd || cmd.Name() == cobra.ShellCompNoDescRequestCmd
}

// addCompletions registers value completion across the tree: -o formats,
// context names for use and disconnect, NodeGroups and deployment names
// from the current bucket's index when a context is connected, provider
// names for connect. Each works in a fresh home: without a context it
// offers what it can (nothing for bucket-backed values) and never fails.
func addCompletions(root *cobra.Command, env *builtins.Env) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.Flags().Lookup("output") != nil {
			_ = c.RegisterFlagCompletionFunc("output", fixed(outputCompletions(c.CommandPath())...))
		}
		if c.Flags().Lookup("nodegroup") != nil {
			_ = c.RegisterFlagCompletionFunc("nodegroup", func(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
				return matching(deployed(cmd.Context(), completionEnv(cmd, env), func(e builtins.ListEntry) string { return e.NodeGroup }), prefix), cobra.ShellCompDirectiveNoFileComp
			})
		}
		if c == root {
			_ = c.RegisterFlagCompletionFunc("context", func(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
				list, err := env.ListContexts()
				if err != nil {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				names := make([]string, 0, len(list))
				for _, e := range list {
					names = append(names, e.Cluster)
				}
				return matching(names, prefix), cobra.ShellCompDirectiveNoFileComp
			})
		}
		switch c.Name() {
		case "use", "disconnect":
			c.ValidArgsFunction = func(_ *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				list, err := env.ListContexts()
				if err != nil {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				names := make([]string, 0, len(list))
				for _, e := range list {
					names = append(names, e.Cluster)
				}
				return matching(names, prefix), cobra.ShellCompDirectiveNoFileComp
			}
		case "delete":
			if c.Parent() == root {
				c.ValidArgsFunction = func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
					if len(args) > 0 {
						return nil, cobra.ShellCompDirectiveNoFileComp
					}
					return matching(deployed(cmd.Context(), completionEnv(cmd, env), func(e builtins.ListEntry) string { return e.Name }), prefix), cobra.ShellCompDirectiveNoFileComp
				}
			}
		case "connect":
			if c.Flags().Lookup("provider") != nil {
				names := make([]string, 0, len(env.Providers))
				for n := range env.Providers {
					names = append(names, n)
				}
				sort.Strings(names)
				_ = c.RegisterFlagCompletionFunc("provider", fixed(names...))
			}
		}
	}
	walk(root)
}

// fixed completes one of values.
func fixed(values ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		return matching(values, prefix), cobra.ShellCompDirectiveNoFileComp
	}
}

// completionEnv is env with the context the completed command line
// selects (--context, else PODMIN_CONTEXT): completion runs no pre-run
// hook, and must offer the names of the cluster the command will use.
func completionEnv(cmd *cobra.Command, env *builtins.Env) *builtins.Env {
	e := *env
	var flag, fromEnv string
	if f := cmd.Flags().Lookup("context"); f != nil {
		flag = f.Value.String()
	}
	if env.LookupEnv != nil {
		fromEnv, _ = env.LookupEnv(contexts.EnvVar)
	}
	e.Selection = contexts.Select(flag, fromEnv)
	return &e
}

// deployed returns the sorted distinct values of field over the current
// cluster's deployments, or nothing without a context or bucket.
func deployed(ctx context.Context, env *builtins.Env, field func(builtins.ListEntry) string) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	if _, err := env.CurrentContext(); err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	list, err := env.List(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range list {
		if v := field(e); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

func matching(values []string, prefix string) []string {
	out := []string{}
	for _, v := range values {
		if strings.HasPrefix(v, prefix) {
			out = append(out, v)
		}
	}
	return out
}
