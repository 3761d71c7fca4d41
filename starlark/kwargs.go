// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"regexp"
	"strings"
)

// flagRE finds a CLI flag in an error message of the builtins package.
var flagRE = regexp.MustCompile(`--([a-z][a-z0-9-]*)([:=]?)`)

// kwargError is a builtins error whose message names keyword arguments
// instead of CLI flags; errors.Is and errors.As still see the original.
type kwargError struct {
	msg string
	err error
}

func (e *kwargError) Error() string { return e.msg }
func (e *kwargError) Unwrap() error { return e.err }

// kwargErrors rewrites the CLI flags an error names ("--file") into the
// keyword arguments of this builtin ("file ="): the builtins package is
// shared with the CLI, so its messages speak of flags, but a script author
// wrote keywords. Flags the builtin has no keyword for stay as they are.
func (c *call) kwargErrors(err error) error {
	msg := err.Error()
	if !strings.Contains(msg, "--") {
		return err
	}
	names := map[string]bool{}
	for _, p := range c.b.Params {
		if !p.Positional {
			names[p.Name] = true
		}
	}
	out := flagRE.ReplaceAllStringFunc(msg, func(f string) string {
		f, colon := strings.CutSuffix(f, ":")
		f, equals := strings.CutSuffix(f, "=")
		k := strings.ReplaceAll(f[2:], "-", "_")
		if k == "for" {
			k = "for_"
		}
		switch {
		case !names[k] && colon:
			return f + ":"
		case !names[k] && equals:
			return f + "="
		case !names[k]:
			return f
		case colon: // "--nodegroup: bad" → "argument nodegroup: bad"
			return "argument " + k + ":"
		case equals: // "--wait=soon" → "wait = soon"
			return k + " = "
		}
		return k + " ="
	})
	if out == msg {
		return err
	}
	return &kwargError{msg: out, err: err}
}
