// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"errors"
	"fmt"
	"time"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/secrets"
)

// secretOps are the secret operations the secrets module calls.
type secretOps interface {
	CreateSecret(ctx context.Context, opts builtins.SecretValueOptions) (builtins.SecretResult, error)
	UpdateSecret(ctx context.Context, opts builtins.SecretValueOptions) (builtins.SecretResult, error)
	DeleteSecret(ctx context.Context, opts builtins.SecretOptions) (builtins.SecretResult, error)
	RestoreSecret(ctx context.Context, opts builtins.SecretOptions) (builtins.SecretResult, error)
	DestroySecret(ctx context.Context, opts builtins.DestroySecretOptions) (builtins.SecretResult, error)
	ListSecrets(ctx context.Context, opts builtins.ListSecretsOptions) (builtins.SecretList, error)
	CheckSecret(opts builtins.SecretOptions) error
	ReadUserFile(name string, limit int64) ([]byte, error)
}

// maxSecretFile bounds what file= reads: the largest value any secrets
// provider stores (Secrets Manager's 64 KiB) and a little more.
const maxSecretFile = 64<<10 + 1

// secretAddress are the parameters that address one secret. "for" is a
// Starlark keyword, so its parameter is for_ (the parity test maps it).
func secretAddress() []Param {
	return []Param{
		{Name: "for_", Type: "str", Doc: "the Pod (DaemonSet name) the secret belongs to (the --for flag)"},
		{Name: "namespace", Type: "str", Doc: "the Pod's namespace (default \"default\")"},
		{Name: "provider", Type: "str", Doc: "secrets provider (default: the context's)"},
		{Name: "system", Type: "bool", Default: "False", Doc: "address /<cluster>/_system/KEY"},
	}
}

var secretKeyParam = Param{Name: "key", Type: "str", Positional: true, Required: true, Doc: "the secret's key"}

func (c *call) unpackSecret(extra ...any) (builtins.SecretOptions, error) {
	var o builtins.SecretOptions
	var system star.Bool
	ptrs := append([]any{&o.Key, &o.For, &o.Namespace, &o.Provider, &system}, extra...)
	if err := c.unpack(ptrs...); err != nil {
		return o, err
	}
	o.System = bool(system)
	return o, nil
}

func secretResultValue(c *call, r builtins.SecretResult) star.Value {
	return result("secret_result", str("cluster", r.Cluster), str("provider", r.Provider), str("name", r.Name),
		str("action", r.Action), value("recovery_window_days", star.MakeInt(r.RecoveryWindowDays)), boolean("planned", c.host.planned()))
}

func secretWrite(verb string, op func(secretOps) func(context.Context, builtins.SecretValueOptions) (builtins.SecretResult, error)) *Builtin {
	return &Builtin{
		Name: "secrets." + verb, Command: "secret " + verb, Returns: "secret_result", Mutates: true,
		Params: append(append([]Param{secretKeyParam}, secretAddress()...),
			Param{Name: "value", Type: "str | secret", Doc: "the value (never printed; scrubbed from output)"},
			Param{Name: "file", Type: "str", Doc: "read the value from this file, byte for byte"}),
		Doc: fmt.Sprintf(`%s a secret from value= or file=.

Same as "podmin secret %s". Returns secret_result(cluster, provider, name, action,
recovery_window_days, planned). The value never appears in output.`, map[string]string{"create": "Creates (fails when it exists)", "update": "Replaces the value of"}[verb], verb),
		impl: func(c *call) (star.Value, error) {
			// A str value is registered before anything else happens, so
			// not even an argument error can print it.
			for _, kv := range c.kwargs {
				if k, ok := kv[0].(star.String); ok && k == "value" {
					if s, ok := kv[1].(star.String); ok {
						c.host.scrub.AddString(c.subject("key"), string(s))
					}
				}
			}
			var v star.Value
			var file string
			o, err := c.unpackSecret(&v, &file)
			if err != nil {
				return nil, err
			}
			val, err := c.secretValue(o.Key, v, file)
			if err != nil {
				return nil, err
			}
			res, err := op(c.host.ops)(c.ctx, builtins.SecretValueOptions{SecretOptions: o, Value: val})
			if err != nil {
				return nil, err
			}
			return secretResultValue(c, res), nil
		},
	}
}

// secretValue takes the value from value= (a str or an opaque secret) or
// from file=, and registers it with the scrubber.
func (c *call) secretValue(key string, v star.Value, file string) (secrets.Value, error) {
	var raw string
	switch x := v.(type) {
	case nil:
		if file == "" {
			return nil, errors.New("pass the value as value = or file =")
		}
		b, err := c.host.ops.ReadUserFile(file, maxSecretFile)
		if err != nil {
			return nil, fmt.Errorf("read the value of %s: %w", key, err)
		}
		raw = string(b)
	case star.String:
		raw = string(x)
	case *Secret:
		raw = x.Reveal()
	default:
		// A wrong type is the script's own mistake, as in UnpackArgs.
		return nil, &argError{msg: fmt.Sprintf("for parameter \"value\": got %s, want str or secret", v.Type())}
	}
	if v != nil && file != "" {
		return nil, errors.New("pass value = or file =, not both")
	}
	c.host.scrub.AddString(key, raw)
	return secrets.Value(raw), nil
}

func secretSimple(verb, doc string, destructive bool, op func(secretOps) func(context.Context, builtins.SecretOptions) (builtins.SecretResult, error)) *Builtin {
	return &Builtin{
		Name: "secrets." + verb, Command: "secret " + verb, Returns: "secret_result", Mutates: true, Destructive: destructive,
		Params: append([]Param{secretKeyParam}, secretAddress()...),
		Doc:    doc + "\n\nSame as \"podmin secret " + verb + "\". Returns secret_result(...).",
		impl: func(c *call) (star.Value, error) {
			o, err := c.unpackSecret()
			if err != nil {
				return nil, err
			}
			res, err := op(c.host.ops)(c.ctx, o)
			if err != nil {
				return nil, err
			}
			return secretResultValue(c, res), nil
		},
	}
}

// secretReader reads a secret's value; Ops that cannot (a recorder without
// it) make secrets.read fail with a clear error.
type secretReader interface {
	ReadSecret(ctx context.Context, opts builtins.SecretOptions) (secrets.Value, builtins.SecretResult, error)
}

func secretsFamily() []*Builtin {
	return []*Builtin{
		{
			Name: "secrets.read", Returns: "secret",
			Params: append([]Param{secretKeyParam}, secretAddress()...),
			Doc: `Reads a secret's current value as an opaque secret.

The result prints as <secret KEY>, cannot become part of a str, and can be
passed whole as value = to secrets.create or secrets.update (to copy a secret
to another Pod, say). The value is registered with the scrubber before the
call returns. There is no CLI command: Podmin never prints a value.`,
			impl: func(c *call) (star.Value, error) {
				o, err := c.unpackSecret()
				if err != nil {
					return nil, err
				}
				r, ok := c.host.ops.(secretReader)
				if !ok {
					return nil, errors.New("reading secret values is not available here")
				}
				v, _, err := r.ReadSecret(c.ctx, o)
				if errors.Is(err, secrets.ErrNotFound) {
					// The one thing asked for is absent (exit 3).
					return nil, notFound(err)
				}
				if err != nil {
					return nil, err
				}
				return NewSecret(c.thread, o.Key, string(v)), nil
			},
		},
		secretWrite("create", func(o secretOps) func(context.Context, builtins.SecretValueOptions) (builtins.SecretResult, error) {
			return o.CreateSecret
		}),
		secretWrite("update", func(o secretOps) func(context.Context, builtins.SecretValueOptions) (builtins.SecretResult, error) {
			return o.UpdateSecret
		}),
		secretSimple("delete", "Schedules a recoverable deletion (aws-secrets-manager only). Destructive: needs confirm or --yes.", true, func(o secretOps) func(context.Context, builtins.SecretOptions) (builtins.SecretResult, error) {
			return o.DeleteSecret
		}),
		secretSimple("restore", "Cancels a scheduled deletion (aws-secrets-manager only).", false, func(o secretOps) func(context.Context, builtins.SecretOptions) (builtins.SecretResult, error) {
			return o.RestoreSecret
		}),
		{
			Name: "secrets.destroy", Command: "secret destroy", Returns: "secret_result", Mutates: true, Destructive: true,
			Params: append([]Param{secretKeyParam}, secretAddress()...),
			Doc: `Deletes a secret permanently. Destructive: needs confirm or --yes.

Same as "podmin secret destroy". Returns secret_result(...).`,
			impl: func(c *call) (star.Value, error) {
				o, err := c.unpackSecret()
				if err != nil {
					return nil, err
				}
				cur, err := c.host.ops.CurrentContext()
				if err != nil {
					return nil, err
				}
				res, err := c.host.ops.DestroySecret(c.ctx, builtins.DestroySecretOptions{SecretOptions: o, Confirm: cur.Cluster})
				if err != nil {
					return nil, err
				}
				return secretResultValue(c, res), nil
			},
		},
		{
			Name: "secrets.list", Command: "secret list", Returns: "secret_list",
			Params: secretAddress(),
			Doc: `Lists secret names and metadata, never values.

Same as "podmin secret list". Returns secret_list(cluster, provider, secrets):
each item is secret_entry(name, namespace, pod, key, system, provider,
last_modified, deletion_scheduled) with times in RFC 3339 or "".`,
			impl: func(c *call) (star.Value, error) {
				var o builtins.ListSecretsOptions
				var system star.Bool
				if err := c.unpack(&o.For, &o.Namespace, &o.Provider, &system); err != nil {
					return nil, err
				}
				o.System = bool(system)
				l, err := c.host.ops.ListSecrets(c.ctx, o)
				if err != nil {
					return nil, err
				}
				vs := make([]star.Value, len(l.Secrets))
				for i, e := range l.Secrets {
					vs[i] = result("secret_entry", str("name", e.Name), str("namespace", e.Namespace), str("pod", e.Pod),
						str("key", e.Key), boolean("system", e.System), str("provider", e.Provider),
						str("last_modified", rfc3339(e.LastModified)), str("deletion_scheduled", rfc3339(e.DeletionScheduled)))
				}
				return result("secret_list", str("cluster", l.Cluster), str("provider", l.Provider), value("secrets", frozenList(vs))), nil
			},
		},
	}
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
