// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"fmt"

	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/secrets"
)

// notProvenHere is why destroy keeps a cluster's workload secrets: a
// secret's name is no proof of who created it, and "podmin secret create"
// stores no create nonce with it.
const notProvenHere = "destroy deletes only secrets it can prove this context created, and nothing proves who created it"

// keptSecrets lists every secret of the cluster that destroy keeps, in
// each secrets provider the context's cloud provider offers: the Pods'
// secrets under /<cluster>/<namespace>/<pod>/ and the allowlisted system
// keys. Each is "kept" with the command that deletes it; a provider whose
// listing fails is one "unknown" entry saying so, never an empty list.
func keptSecrets(ctx context.Context, h Host, c contexts.Context) []SecretAction {
	var out []SecretAction
	for _, p := range secretsProvidersOf(h, c) {
		where := fmt.Sprintf("/%s/ in %s", c.Cluster, p)
		s, err := h.Secrets(ctx, c, p)
		if err != nil {
			out = append(out, SecretAction{Name: where, Action: "unknown", Reason: fmt.Sprintf("the provider could not be opened (%v): which secrets of the cluster it holds is unknown; check with \"podmin secret list --provider %s\" while a context of cluster %s exists", err, p, c.Cluster)})
			continue
		}
		entries, err := s.List(ctx, c.Cluster, secrets.Filter{})
		if err != nil {
			out = append(out, SecretAction{Name: where, Action: "unknown", Reason: fmt.Sprintf("listing it failed (%v): which secrets of the cluster it holds is unknown; check with \"podmin secret list --provider %s\" while a context of cluster %s exists", err, p, c.Cluster)})
			continue
		}
		for _, e := range entries {
			what := fmt.Sprintf("a secret of Pod %s (namespace %s) in %s", e.Pod, e.Namespace, p)
			if e.System {
				what = "a system key in " + p
			}
			out = append(out, SecretAction{Name: e.Name, Action: "kept", Reason: fmt.Sprintf("%s: %s; %s", what, notProvenHere, keptSecretAdvice(c, p, e))})
		}
	}
	return out
}

// secretsProvidersOf names the secrets providers that may hold c's
// secrets: on a cloud, each its provider offers; on a local context, the
// local store and the context's default (a local destroy reaches out to no
// cloud it was not told to use).
func secretsProvidersOf(h Host, c contexts.Context) []string {
	if c.Provider != "local" {
		return h.SecretsProviders(c)
	}
	out := []string{secrets.Local}
	if c.SecretsProvider != "" && c.SecretsProvider != secrets.Local {
		out = append(out, c.SecretsProvider)
	}
	return out
}

// keptSecretAdvice says how the operator deletes a secret destroy keeps,
// and why it matters on AWS: a later cluster of the same name would mount
// it, as its names are the cluster's.
func keptSecretAdvice(c contexts.Context, provider string, e secrets.Entry) string {
	podmin := fmt.Sprintf("podmin secret destroy %s --for %s -n %s --provider %s -y", e.Key, e.Pod, e.Namespace, provider)
	if e.System {
		podmin = fmt.Sprintf("podmin secret destroy %s --system --provider %s -y", e.Key, provider)
	}
	advice := fmt.Sprintf("if it should go, delete it with %q while a context of cluster %s exists", podmin, c.Cluster)
	switch provider {
	case secrets.ParameterStore:
		advice += fmt.Sprintf(", or later with \"aws ssm delete-parameter --name %s\"", e.Name)
	case secrets.SecretsManager:
		advice += fmt.Sprintf(", or later with \"aws secretsmanager delete-secret --secret-id %s --force-delete-without-recovery\"", e.Name)
	}
	if provider != secrets.Local {
		advice += fmt.Sprintf("; kept, a later cluster named %s would mount it", c.Cluster)
	}
	return advice
}

// keptSecretSteps renders the kept secrets in destroy's plan.
func keptSecretSteps(kept []SecretAction) []string {
	var steps []string
	for _, a := range kept {
		switch a.Action {
		case "kept":
			steps = append(steps, "keep secret "+a.Name+": "+a.Reason)
		case "unknown":
			steps = append(steps, "secrets "+a.Name+" unknown: "+a.Reason)
		}
	}
	return steps
}
