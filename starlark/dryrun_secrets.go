// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"cmp"
	"context"

	"podmin.dev/podmin/builtins"
)

// Secret reads run for real; writes are checked (CheckSecret, no provider
// call) and recorded. A value is never part of the plan.

func (r *recorder) CheckSecret(o builtins.SecretOptions) error { return r.real.CheckSecret(o) }

func (r *recorder) ListSecrets(ctx context.Context, o builtins.ListSecretsOptions) (builtins.SecretList, error) {
	return r.real.ListSecrets(ctx, o)
}

func (r *recorder) secret(o builtins.SecretOptions, op, action, detail string) (builtins.SecretResult, error) {
	if err := r.real.CheckSecret(o); err != nil {
		return builtins.SecretResult{}, err
	}
	cur, err := r.CurrentContext()
	if err != nil {
		return builtins.SecretResult{}, err
	}
	name := "/" + cur.Cluster + "/" + cmp.Or(o.Namespace, "default") + "/" + o.For + "/" + o.Key
	if o.System {
		name = "/" + cur.Cluster + "/_system/" + o.Key
	}
	provider := cmp.Or(o.Provider, cur.SecretsProvider)
	r.plan.add(Change{Op: "secrets." + op, Target: name, Where: "secrets provider " + provider, Detail: detail})
	return builtins.SecretResult{Cluster: cur.Cluster, Provider: provider, Name: name, Action: action}, nil
}

func (r *recorder) CreateSecret(_ context.Context, o builtins.SecretValueOptions) (builtins.SecretResult, error) {
	return r.secret(o.SecretOptions, "create", "created", "store a new value")
}

func (r *recorder) UpdateSecret(_ context.Context, o builtins.SecretValueOptions) (builtins.SecretResult, error) {
	return r.secret(o.SecretOptions, "update", "updated", "replace the value")
}

func (r *recorder) DeleteSecret(_ context.Context, o builtins.SecretOptions) (builtins.SecretResult, error) {
	return r.secret(o, "delete", "scheduled-for-deletion", "schedule a recoverable deletion")
}

func (r *recorder) RestoreSecret(_ context.Context, o builtins.SecretOptions) (builtins.SecretResult, error) {
	return r.secret(o, "restore", "restored", "cancel the scheduled deletion")
}

func (r *recorder) DestroySecret(_ context.Context, o builtins.DestroySecretOptions) (builtins.SecretResult, error) {
	return r.secret(o.SecretOptions, "destroy", "destroyed", "delete permanently")
}
