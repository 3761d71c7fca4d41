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
	// Action is created, kept (it existed: create-only; at destroy, it
	// is not proven this context's, or is a secret of the cluster's
	// Pods), destroyed, absent, or unknown (at destroy, a secrets
	// provider that could not be listed: Name is "/<cluster>/ in
	// <provider>").
	Action string `json:"action"`
	// Reason says why destroy keeps the secret and what the operator can
	// do, or why what a provider holds is unknown; empty otherwise.
	Reason string `json:"reason"`
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
// cluster's trust. Each secret is reported once, in setup's result (the
// plan said they would be stored): no progress line repeats it.
func ensureCASecrets(ctx context.Context, h Host, c contexts.Context) ([]SecretAction, error) {
	_, got, err := h.EnsureCASecrets(ctx, caSecretsProvider(c))
	if err != nil {
		return nil, err
	}
	out := make([]SecretAction, 0, len(got))
	for _, s := range got {
		action := s.Action
		if action == "existing" {
			action = "kept"
		}
		out = append(out, SecretAction{Name: s.Name, Action: action})
	}
	return out, nil
}

// notCreatedHere is the reason destroy keeps a CA secret it cannot prove
// this context created.
const notCreatedHere = "not created by this context"

// planCASecrets proves, for each CA secret, whether this context created
// it: only a secret carrying the context's CANonce (stored with it when
// setup created it) is to be destroyed; one without it (it existed before,
// was made by another context of a same-named cluster, or by anyone else)
// is kept. A nonce that cannot be read fails closed: nothing is deleted.
func planCASecrets(ctx context.Context, h Host, c contexts.Context) (secrets.Store, []SecretAction, error) {
	store, err := caStore(ctx, h, c)
	if err != nil {
		return nil, nil, err
	}
	var out []SecretAction
	for _, key := range []string{secrets.WorkloadCAKey, secrets.ClusterCA} {
		n, err := secrets.InternalSecret(c.Cluster, key)
		if err != nil {
			return nil, nil, err
		}
		a, err := proveCASecret(ctx, store, c, n)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, a)
	}
	return store, out, nil
}

// proveCASecret returns "destroyed" (what destroy will do), "absent" or
// "kept" with the reason and what the operator can do.
func proveCASecret(ctx context.Context, store secrets.Store, c contexts.Context, n secrets.Name) (SecretAction, error) {
	a := SecretAction{Name: n.String()}
	ns, ok := store.(secrets.NonceStore)
	if !ok {
		a.Action, a.Reason = "kept", fmt.Sprintf("%s: %s keeps no create nonce, so Podmin cannot prove who created it; delete it yourself if it should go", notCreatedHere, store.Provider())
		return a, nil
	}
	got, err := ns.CreateNonce(ctx, n)
	switch {
	case errors.Is(err, secrets.ErrNotFound):
		a.Action = "absent"
	case err != nil:
		return a, fmt.Errorf("%w: the create nonce of %s in %s cannot be read (%w): Podmin will not delete a secret it cannot prove it created; nothing was deleted: fix the access (for Parameter Store, ssm:ListTagsForResource) and run destroy again", ErrNotOwned, n, store.Provider(), err)
	case contexts.ProvenBy(c.CANonce, got):
		a.Action = "destroyed"
	default:
		a.Action, a.Reason = "kept", fmt.Sprintf("%s: it does not carry the %s this context recorded when setup created it (it existed before, or another context or tool made it); if it is this cluster's and should go, %s", notCreatedHere, secrets.CreateNonceTag, deleteAdvice(store.Provider(), n))
	}
	return a, nil
}

// deleteAdvice says how an operator deletes a secret Podmin keeps.
func deleteAdvice(provider string, n secrets.Name) string {
	if provider == secrets.ParameterStore {
		return fmt.Sprintf("delete it yourself: aws ssm delete-parameter --name %s", n)
	}
	return fmt.Sprintf("delete it yourself from the %s secrets store", provider)
}

// planSteps renders the CA secrets part of destroy's plan.
func caPlanSteps(plan []SecretAction) []string {
	var steps []string
	for _, a := range plan {
		switch a.Action {
		case "destroyed":
			steps = append(steps, "destroy CA secret "+a.Name+" (created by this context)")
		case "kept":
			steps = append(steps, "keep CA secret "+a.Name+": "+a.Reason)
		}
	}
	return steps
}

// destroyCASecrets permanently deletes the CA secrets plan proved this
// context created, proving each again just before its delete; an absent
// one is already gone, so an interrupted destroy can run again.
func destroyCASecrets(ctx context.Context, h Host, c contexts.Context, store secrets.Store, plan []SecretAction) ([]SecretAction, error) {
	var out []SecretAction
	for _, p := range plan {
		if p.Action != "destroyed" {
			out = append(out, p)
			continue
		}
		n, err := secrets.ParseName(p.Name)
		if err != nil {
			return out, err
		}
		a, err := proveCASecret(ctx, store, c, n)
		if err != nil || a.Action != "destroyed" {
			out = append(out, a)
			if err != nil {
				return out, err
			}
			continue
		}
		switch err := store.Destroy(ctx, n); {
		case err == nil:
			progressf(h, "destroyed %s in %s", n, store.Provider())
		case errors.Is(err, secrets.ErrNotFound):
			a.Action = "absent"
		default:
			return out, fmt.Errorf("destroy %s in %s: %w", n, store.Provider(), err)
		}
		out = append(out, a)
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
