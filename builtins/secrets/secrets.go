// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package secrets

import (
	"context"
	"fmt"
	"slices"

	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/scrub"
	"podmin.dev/podmin/internal/secrets"
)

// SecretOptions address one secret; field names follow the flags of
// "podmin secret". Provider defaults to the context's secrets provider and
// Namespace to "default". System addresses /<cluster>/_system/KEY instead
// of a Pod's secret, and only for the allowlisted otel-logs-headers.
type SecretOptions struct {
	Key       string
	For       string
	Namespace string
	Provider  string
	System    bool
}

// SecretValueOptions are the inputs of create and update. The CLI reads
// Value from a prompt, standard input or a file; it is never printed.
type SecretValueOptions struct {
	SecretOptions
	Value secrets.Value
}

// DestroySecretOptions are the inputs of destroy. Confirm must equal the
// cluster ID: destroy is permanent, and a script must say so explicitly
// (the CLI fills it after its prompt or --yes).
type DestroySecretOptions struct {
	SecretOptions
	Confirm string
}

// ListSecretsOptions are the inputs of list. For (with Namespace, default
// "default") limits it to one Pod, Namespace alone to one namespace, System
// to the system keys.
type ListSecretsOptions struct {
	For       string
	Namespace string
	Provider  string
	System    bool
}

// SecretResult reports what a secret operation did. It never holds a value.
type SecretResult struct {
	Cluster  string `json:"cluster"`
	Provider string `json:"provider"`
	Name     string `json:"name"`
	// Action is created, updated, scheduled-for-deletion, restored or
	// destroyed.
	Action string `json:"action"`
	// RecoveryWindowDays is how long a scheduled deletion can be restored.
	RecoveryWindowDays int `json:"recoveryWindowDays,omitempty"`
}

// SecretList is the result of list.
type SecretList struct {
	Cluster  string          `json:"cluster"`
	Provider string          `json:"provider"`
	Secrets  []secrets.Entry `json:"secrets"`
}

// CreateSecret stores a new secret; it fails when the secret exists.
func CreateSecret(ctx context.Context, e *openv.Env, opts SecretValueOptions) (SecretResult, error) {
	e.Scrub.Add(opts.Key, opts.Value)
	return secretOp(ctx, e, opts.SecretOptions, "created", func(s secrets.Store, n secrets.Name) error {
		return s.Create(ctx, n, opts.Value)
	})
}

// UpdateSecret replaces an existing secret's value.
func UpdateSecret(ctx context.Context, e *openv.Env, opts SecretValueOptions) (SecretResult, error) {
	e.Scrub.Add(opts.Key, opts.Value)
	return secretOp(ctx, e, opts.SecretOptions, "updated", func(s secrets.Store, n secrets.Name) error {
		return s.Update(ctx, n, opts.Value)
	})
}

// ReadSecret returns a secret's current value, registered with Env.Scrub
// before it is returned. No command prints it: the CLI never shows values,
// and scripts receive it as an opaque secret.
func ReadSecret(ctx context.Context, e *openv.Env, opts SecretOptions) (secrets.Value, SecretResult, error) {
	var v secrets.Value
	res, err := secretOp(ctx, e, opts, "read", func(s secrets.Store, n secrets.Name) error {
		var err error
		v, err = s.Read(ctx, n)
		e.Scrub.Add(opts.Key, v)
		return err
	})
	return v, res, err
}

// DeleteSecret schedules a recoverable deletion on providers that have one
// (aws-secrets-manager) and fails on the others, naming destroy.
func DeleteSecret(ctx context.Context, e *openv.Env, opts SecretOptions) (SecretResult, error) {
	return secretOp(ctx, e, opts, "scheduled-for-deletion", func(s secrets.Store, n secrets.Name) error {
		return s.Delete(ctx, n)
	})
}

// RestoreSecret cancels a scheduled deletion.
func RestoreSecret(ctx context.Context, e *openv.Env, opts SecretOptions) (SecretResult, error) {
	return secretOp(ctx, e, opts, "restored", func(s secrets.Store, n secrets.Name) error {
		return s.Restore(ctx, n)
	})
}

// DestroySecret deletes a secret permanently once Confirm equals the
// cluster ID.
func DestroySecret(ctx context.Context, e *openv.Env, opts DestroySecretOptions) (SecretResult, error) {
	return secretOp(ctx, e, opts.SecretOptions, "destroyed", func(s secrets.Store, n secrets.Name) error {
		if opts.Confirm != n.Cluster() {
			return fmt.Errorf("destroying %s is permanent and needs confirmation: confirm with the cluster ID %q (podmin secret destroy asks for it; --yes gives it)", n, n.Cluster())
		}
		return s.Destroy(ctx, n)
	})
}

// ListSecrets lists secret names and metadata, never values. Podmin's
// internal system keys are never listed.
func ListSecrets(ctx context.Context, e *openv.Env, opts ListSecretsOptions) (SecretList, error) {
	if err := CheckListSecrets(opts); err != nil {
		return SecretList{}, openv.InvalidArgument(err)
	}
	if err := CheckProviderName(opts.Provider); err != nil {
		return SecretList{}, err
	}
	c, err := e.CurrentContext()
	if err != nil {
		return SecretList{}, err
	}
	f := listFilter(opts)
	if err := secrets.CheckFilter(c.Cluster, f); err != nil {
		return SecretList{}, err
	}
	s, err := e.OpenSecrets(ctx, c, opts.Provider)
	if err != nil {
		return SecretList{}, err
	}
	entries, err := s.List(ctx, c.Cluster, f)
	if err != nil {
		return SecretList{}, err
	}
	if entries == nil {
		entries = []secrets.Entry{}
	}
	return SecretList{Cluster: c.Cluster, Provider: s.Provider(), Secrets: entries}, nil
}

// CheckSecret validates the options of a secret operation without calling
// the provider, so the CLI can refuse a bad name before it prompts for a
// value.
func CheckSecret(e *openv.Env, opts SecretOptions) error {
	c, err := e.CurrentContext()
	if err != nil {
		return err
	}
	if _, err := secretName(c, opts); err != nil {
		return err
	}
	_, err = e.SecretsProvider(c, opts.Provider)
	return err
}

// secretOp validates everything that needs no provider call, opens the
// provider and runs op.
func secretOp(ctx context.Context, e *openv.Env, opts SecretOptions, action string, op func(secrets.Store, secrets.Name) error) (SecretResult, error) {
	if err := CheckSecretAddress(opts); err != nil {
		return SecretResult{}, openv.InvalidArgument(err)
	}
	if err := CheckProviderName(opts.Provider); err != nil {
		return SecretResult{}, err
	}
	c, err := e.CurrentContext()
	if err != nil {
		return SecretResult{}, err
	}
	n, err := secretName(c, opts)
	if err != nil {
		return SecretResult{}, err
	}
	s, err := e.OpenSecrets(ctx, c, opts.Provider)
	if err != nil {
		return SecretResult{}, err
	}
	if err := op(s, n); err != nil {
		return SecretResult{}, err
	}
	res := SecretResult{Cluster: c.Cluster, Provider: s.Provider(), Name: n.String(), Action: action}
	if action == "scheduled-for-deletion" {
		res.RecoveryWindowDays = s.Capabilities().RecoveryWindowDays
	}
	return res, nil
}

// secretName builds the secret's name from the options.
// listFilter is the filter of a secret listing.
func listFilter(opts ListSecretsOptions) secrets.Filter {
	f := secrets.Filter{Namespace: opts.Namespace, Pod: opts.For, System: opts.System}
	if opts.For != "" && f.Namespace == "" {
		f.Namespace = manifest.DefaultNamespace
	}
	return f
}

// CheckListSecrets applies the rules of a secret listing's filter that
// need no context: the CLI reports them as bad usage.
func CheckListSecrets(opts ListSecretsOptions) error {
	return secrets.CheckFilter("cluster", listFilter(opts))
}

// CheckSecretAddress applies the rules of how opts address a secret that
// need no context (--for or --system, the key, Pod and namespace names):
// the CLI reports them as bad usage before it reads a context.
func CheckSecretAddress(opts SecretOptions) error {
	// Any valid cluster ID stands in for the context's: the rules checked
	// here do not depend on it.
	_, err := secretName(contexts.Context{Cluster: "cluster"}, opts)
	return err
}

func secretName(c contexts.Context, opts SecretOptions) (secrets.Name, error) {
	if opts.System {
		if opts.For != "" || opts.Namespace != "" {
			return secrets.Name{}, fmt.Errorf("%w: --system addresses a system key of the cluster (/CLUSTER/%s/KEY), which belongs to no Pod: omit --for and --namespace",
				secrets.ErrInvalid, secrets.SystemNamespace)
		}
		return secrets.SystemSecret(c.Cluster, opts.Key)
	}
	if opts.For == "" {
		return secrets.Name{}, fmt.Errorf("%w: no Pod given: pass --for POD (the DaemonSet's name), or --system for %s", secrets.ErrInvalid, secrets.OtelLogsHeaders)
	}
	return secrets.PodSecret(c.Cluster, opts.Namespace, opts.For, opts.Key)
}

// CheckProviderName refuses a secrets provider name no build knows
// (openv.ErrInvalidArgument); "" means the context's default. Whether the
// context's provider allows it is checked once the context is read.
func CheckProviderName(name string) error {
	if name != "" && !slices.Contains(manifest.SecretsProviders(), name) {
		return openv.InvalidArgument(fmt.Errorf("unknown secrets provider %s: use one of %q", scrub.Quote(name), manifest.SecretsProviders()))
	}
	return nil
}
