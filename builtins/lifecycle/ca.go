// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/secrets"
)

// SecretAction is what setup or destroy did to one of the cluster's
// system secrets.
type SecretAction struct {
	// Name is the full secret name, e.g. /demo/_system/workload-ca-key.
	Name string `json:"name"`
	// Action is created, kept (it existed: create-only), destroyed or
	// absent.
	Action string `json:"action"`
}

// caSecretsProvider is where a cluster's CA secrets live: the agents of an
// AWS cluster read them from Parameter Store, local agents from the local
// store.
func caSecretsProvider(c contexts.Context) string {
	if c.Provider == "local" {
		return secrets.Local
	}
	return secrets.ParameterStore
}

// ensureCASecrets create-only stores the workload CA key and the cluster
// CA through the Host's EnsureCASecrets, in the store the agents read. An
// existing secret is kept as it is, so a setup after teardown keeps the
// cluster's trust.
func ensureCASecrets(ctx context.Context, h Host, c contexts.Context) ([]SecretAction, error) {
	provider, got, err := h.EnsureCASecrets(ctx, caSecretsProvider(c))
	if err != nil {
		return nil, err
	}
	out := make([]SecretAction, 0, len(got))
	for _, s := range got {
		action := s.Action
		if action == "existing" {
			action = "kept"
		}
		if action == "created" {
			progressf(h, "stored %s in %s", s.Name, provider)
		}
		out = append(out, SecretAction{Name: s.Name, Action: action})
	}
	return out, nil
}

// destroyCASecrets permanently deletes both CA secrets; an absent one is
// already gone, so an interrupted destroy can run again.
func destroyCASecrets(ctx context.Context, h Host, c contexts.Context) ([]SecretAction, error) {
	store, err := caStore(ctx, h, c)
	if err != nil {
		return nil, err
	}
	var out []SecretAction
	for _, key := range []string{secrets.WorkloadCAKey, secrets.ClusterCA} {
		n, err := secrets.InternalSecret(c.Cluster, key)
		if err != nil {
			return nil, err
		}
		switch err := store.Destroy(ctx, n); {
		case err == nil:
			progressf(h, "destroyed %s in %s", n, store.Provider())
			out = append(out, SecretAction{Name: n.String(), Action: "destroyed"})
		case errors.Is(err, secrets.ErrNotFound):
			out = append(out, SecretAction{Name: n.String(), Action: "absent"})
		default:
			return out, fmt.Errorf("destroy %s in %s: %w", n, store.Provider(), err)
		}
	}
	return out, nil
}

func caStore(ctx context.Context, h Host, c contexts.Context) (secrets.Store, error) {
	p := caSecretsProvider(c)
	s, err := h.Secrets(ctx, c, p)
	if err != nil {
		return nil, fmt.Errorf("open secrets provider %s for the cluster's CA secrets: %w", p, err)
	}
	return s, nil
}
