// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"errors"
	"fmt"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/internal/scrub"
)

// A parameter of main whose default is podmin.secret_param() takes a
// secret: its command-line value is registered with the scrubber and
// wrapped as a Secret while the arguments are parsed, so no str of it
// ever exists in the script, in ctx.args or in what Podmin prints.

// secretParam is the default value that marks such a parameter. main
// never receives it: an omitted optional secret is passed as None.
type secretParam struct {
	key      string
	required bool
}

var _ star.Value = (*secretParam)(nil)

func (p *secretParam) String() string {
	if p.required {
		return "podmin.secret_param(required = True)"
	}
	return "podmin.secret_param()"
}
func (p *secretParam) Type() string     { return "secret_param" }
func (p *secretParam) Freeze()          {}
func (p *secretParam) Truth() star.Bool { return false }
func (p *secretParam) Hash() (uint32, error) {
	return 0, errors.New("unhashable type: secret_param")
}

// secretLabel is the name a secret parameter's value is shown as.
func (p mainParam) secretLabel() string {
	if sp, ok := p.def.(*secretParam); ok && sp.key != "" {
		return sp.key
	}
	return p.name
}

func isSecretParam(p mainParam) bool {
	_, ok := p.def.(*secretParam)
	return ok
}

// required reports whether the parameter must be given.
func (p mainParam) required() bool {
	if sp, ok := p.def.(*secretParam); ok {
		return sp.required
	}
	return p.def == nil
}

// secretArg registers a secret parameter's value with reg before anything
// else sees it, and wraps it.
func secretArg(reg *scrub.Registry, p mainParam, value string) *Secret {
	reg.AddString(p.secretLabel(), value)
	return &Secret{key: p.secretLabel(), value: value}
}

// secretKwarg is t.run's value for a secret parameter: a str is wrapped
// as podmin run wraps it, a secret passes as it is.
func secretKwarg(reg *scrub.Registry, p mainParam, v star.Value) (star.Value, error) {
	switch x := v.(type) {
	case star.String:
		return secretArg(reg, p, string(x)), nil
	case *Secret:
		return x, nil
	case star.NoneType:
		if !p.required() {
			return x, nil
		}
	}
	return nil, fmt.Errorf("want a secret or str, got %s", v.Type())
}

// omittedSecrets passes None for each optional secret parameter not
// given, so main never sees the secret_param marker.
func omittedSecrets(params []mainParam, given func(name string) bool) []star.Tuple {
	var out []star.Tuple
	for _, p := range params {
		if isSecretParam(p) && !p.required() && !given(p.name) {
			out = append(out, star.Tuple{star.String(p.name), star.None})
		}
	}
	return out
}

var secretParamParams = []Param{
	{Name: "key", Type: "str", Doc: "the name shown in the value's place, <secret KEY>; the parameter's name when not given"},
	{Name: "required", Type: "bool", Default: "False", Doc: "the recipe cannot run without it; when False and it is not given, main receives None"},
}

func secretParamBuiltin() *Builtin {
	return &Builtin{
		Name:    "secret_param",
		Returns: "secret_param",
		Params:  secretParamParams,
		Doc: `Marks a parameter of main as a secret: the default of the parameter.

def main(ctx, token = podmin.secret_param()) takes --token=… as a secret
value, exactly what podmin.secret returns: it is registered with the
scrubber while the arguments are parsed, before main runs, and ctx.args and
the parameter hold it only as a secret, which prints as <secret token>.
Pass it where a secret is accepted, such as value = of secrets.create. An
optional secret that is not given is None; required = True makes the run
fail without it. podmin test passes it the same way: t.run(main, token = "…")
or token = podmin.secret("…").`,
		impl: func(c *call) (star.Value, error) {
			var key string
			var required star.Bool
			if err := c.unpack(&key, &required); err != nil {
				return nil, err
			}
			return &secretParam{key: key, required: bool(required)}, nil
		},
	}
}
