// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"

	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/secrets"
)

// CASecretsOptions are the inputs of EnsureCASecrets. Provider defaults to
// the cloud provider's system store, where every agent reads the CA
// secrets: aws-parameter-store on aws (SSM), local on local. The context's
// default for Pod secrets does not apply.
type CASecretsOptions struct {
	Provider string
}

// CASecret reports one CA secret.
type CASecret struct {
	Name string `json:"name"`
	// Action is "created" when this call stored the value, "existing" when
	// a value was already there and was kept.
	Action string `json:"action"`
}

// CASecretsResult reports what EnsureCASecrets did. It never holds a value.
type CASecretsResult struct {
	Cluster  string     `json:"cluster"`
	Provider string     `json:"provider"`
	Secrets  []CASecret `json:"secrets"`
}

// EnsureCASecrets create-only stores the cluster's two CA secrets, as setup
// does before applying infrastructure: a random 32-byte workload CA key at
// /<cluster>/_system/workload-ca-key and the separate coordination CA
// certificate and key at /<cluster>/_system/cluster-ca. An existing value
// is never overwritten; it is checked and reported as existing.
func (e *Env) EnsureCASecrets(ctx context.Context, opts CASecretsOptions) (CASecretsResult, error) {
	c, err := e.CurrentContext()
	if err != nil {
		return CASecretsResult{}, err
	}
	provider := opts.Provider
	if provider == "" {
		p, err := e.provider(c.Provider)
		if err != nil {
			return CASecretsResult{}, fmt.Errorf("context %s: %w", c.Cluster, err)
		}
		provider = p.SecretsProviders()[0]
	}
	s, err := e.openSecrets(ctx, c, provider)
	if err != nil {
		return CASecretsResult{}, err
	}
	got, err := ensureCASecrets(ctx, s, c.Cluster, rand.Reader, time.Now())
	if err != nil {
		return CASecretsResult{}, err
	}
	for _, g := range got {
		e.progress("%s %s", g.Action, g.Name)
	}
	return CASecretsResult{Cluster: c.Cluster, Provider: s.Provider(), Secrets: got}, nil
}

func ensureCASecrets(ctx context.Context, s secrets.Store, cluster string, random io.Reader, now time.Time) ([]CASecret, error) {
	keyValue, err := pki.GenerateWorkloadKey(random)
	if err != nil {
		return nil, err
	}
	caValue, err := pki.GenerateClusterCA(random, cluster, now)
	if err != nil {
		return nil, err
	}
	var out []CASecret
	for _, sec := range []struct {
		key   string
		value []byte
		check func([]byte) error
	}{
		{secrets.WorkloadCAKey, keyValue, func(v []byte) error { _, err := pki.ParseWorkloadKey(v); return err }},
		{secrets.ClusterCA, caValue, func(v []byte) error { _, err := pki.ParseClusterCA(v, cluster); return err }},
	} {
		name, err := secrets.InternalSecret(cluster, sec.key)
		if err != nil {
			return nil, err
		}
		action, err := createOnly(ctx, s, name, sec.value, sec.check)
		if err != nil {
			return out, err
		}
		out = append(out, CASecret{Name: name.String(), Action: action})
	}
	return out, nil
}

// createOnly stores value at name unless a value exists. An ambiguous
// create (an error other than "exists", e.g. a lost response) is resolved
// by reading the stored value back: equal to the value this call generated
// means it is ours; a different value belongs to someone else and is kept.
func createOnly(ctx context.Context, s secrets.Store, name secrets.Name, value []byte, check func([]byte) error) (string, error) {
	createErr := s.Create(ctx, name, secrets.Value(value))
	if createErr == nil {
		return "created", nil
	}
	stored, err := s.Read(ctx, name)
	switch {
	case errors.Is(err, secrets.ErrNotFound) && !errors.Is(createErr, secrets.ErrExists):
		return "", fmt.Errorf("create %s: %w: run setup again", name, createErr)
	case err != nil:
		return "", fmt.Errorf("create %s: %w; reading it back: %w", name, createErr, err)
	case bytes.Equal(stored, value):
		return "created", nil
	}
	if err := check(stored); err != nil {
		return "", fmt.Errorf("%s already exists but is not valid (%w): it was not overwritten; restore it or destroy the cluster's CA secrets", name, err)
	}
	return "existing", nil
}
