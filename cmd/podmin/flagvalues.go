// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/scrub"
	"podmin.dev/podmin/internal/secrets"
)

// enumValue is a string flag that accepts only its listed values. A bad
// value fails while the flags are parsed, so it is a usage error (exit 2)
// before any context or network access. The examples test reads Allowed
// to check that the help lists exactly what the flag accepts.
type enumValue struct {
	p       *string
	noun    string
	allowed []string
}

// newEnumValue binds p, set to def, to a flag that accepts only allowed;
// noun names the value in errors ("output format").
func newEnumValue(p *string, def, noun string, allowed ...string) *enumValue {
	*p = def
	return &enumValue{p: p, noun: noun, allowed: allowed}
}

func (e *enumValue) String() string { return *e.p }
func (e *enumValue) Type() string   { return strings.Join(e.allowed, "|") }

// Allowed lists the accepted values in the order the help gives them.
func (e *enumValue) Allowed() []string { return e.allowed }

func (e *enumValue) Set(v string) error {
	if !slices.Contains(e.allowed, v) {
		return fmt.Errorf("unknown %s %s: use one of %s", e.noun, scrub.Quote(v), orList(e.allowed))
	}
	*e.p = v
	return nil
}

// checkedValue is a flag whose value is validated as it is parsed, with
// the same check the operation itself applies later.
type checkedValue struct {
	pflag.Value
	check func(string) error
}

func (c checkedValue) Set(v string) error {
	if err := c.check(v); err != nil {
		return err
	}
	return c.Value.Set(v)
}

// orList renders values as "a, b or c".
func orList(values []string) string {
	switch len(values) {
	case 0:
		return ""
	case 1:
		return values[0]
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}

// flagCheck validates one flag's values while they are parsed, with the
// check and message the operation itself would give later.
type flagCheck struct {
	// command is a command path prefix ("podmin secret"); empty means all.
	command string
	flag    string
	check   func(string) error
}

// flagChecks lists the flags checked at parse time. The provider names
// come from env, so a build with other providers checks those.
func flagChecks(env *builtins.Env) []flagCheck {
	checks := []flagCheck{{flag: "nodegroup", check: ids.ValidateNodeGroup}}
	if len(env.Providers) > 0 {
		names := slices.Sorted(maps.Keys(env.Providers))
		checks = append(checks, flagCheck{command: "podmin connect", flag: "provider", check: func(v string) error {
			if !slices.Contains(names, v) {
				return fmt.Errorf("unknown provider %s: use one of %q", scrub.Quote(v), names)
			}
			return nil
		}})
	}
	secretsProvider := func(v string) error {
		if !slices.Contains(manifest.SecretsProviders(), v) {
			return fmt.Errorf("unknown secrets provider %s: use one of %q", scrub.Quote(v), manifest.SecretsProviders())
		}
		return nil
	}
	return append(checks,
		flagCheck{command: "podmin connect", flag: "secrets-provider", check: secretsProvider},
		flagCheck{command: "podmin secret", flag: "provider", check: secretsProvider},
		flagCheck{command: "podmin install cloudflared", flag: "provider", check: secretsProvider},
	)
}

// argChecks validates positional arguments before anything runs, per
// command path: a bad argument is bad usage.
var argChecks = map[string]func(args []string) error{
	"podmin connect":        func(args []string) error { return ids.ValidateCluster(args[0]) },
	"podmin secret create":  secretKeyArg,
	"podmin secret update":  secretKeyArg,
	"podmin secret delete":  secretKeyArg,
	"podmin secret restore": secretKeyArg,
	"podmin secret destroy": secretKeyArg,
}

func secretKeyArg(args []string) error { return secrets.CheckKey(args[0]) }

// checkFlagValues wraps the plain string flags named in flagChecks on c
// and every command below it, so "-g Bad_Group" is a usage error before
// any context or network access. Flags of other types (setup's NodeGroup
// specs) keep their own parsing.
func checkFlagValues(c *cobra.Command, checks []flagCheck) {
	path := c.CommandPath()
	c.Flags().VisitAll(func(f *pflag.Flag) {
		for _, fc := range checks {
			if fc.flag == f.Name && f.Value.Type() == "string" &&
				(fc.command == "" || path == fc.command || strings.HasPrefix(path, fc.command+" ")) {
				f.Value = checkedValue{Value: f.Value, check: fc.check}
			}
		}
	})
	if check, ok := argChecks[path]; ok && c.Args != nil {
		count := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := count(cmd, args); err != nil {
				return err
			}
			return check(args)
		}
	}
	for _, sub := range c.Commands() {
		checkFlagValues(sub, checks)
	}
}
