// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"podmin.dev/podmin/internal/ids"
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
		return fmt.Errorf("unknown %s %q: use one of %s", e.noun, v, orList(e.allowed))
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

// checkedFlags validates, per flag name, the values of plain string flags
// while they are parsed, with the check the operation itself applies.
var checkedFlags = map[string]func(string) error{
	"nodegroup": ids.ValidateNodeGroup,
}

// checkFlagValues wraps the string flags named in checkedFlags on every
// command below c, so "-g Bad_Group" is a usage error before any context
// or network access. Flags of other types (setup's NodeGroup specs) keep
// their own parsing.
func checkFlagValues(c *cobra.Command) {
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if check, ok := checkedFlags[f.Name]; ok && f.Value.Type() == "string" {
			f.Value = checkedValue{Value: f.Value, check: check}
		}
	})
	for _, sub := range c.Commands() {
		checkFlagValues(sub)
	}
}
