// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package secrets

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"

	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/contexts"
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
func EnsureCASecrets(ctx context.Context, e *openv.Env, opts CASecretsOptions) (CASecretsResult, error) {
	c, err := e.CurrentContext()
	if err != nil {
		return CASecretsResult{}, err
	}
	provider := opts.Provider
	if provider == "" {
		p, err := e.Provider(c.Provider)
		if err != nil {
			return CASecretsResult{}, fmt.Errorf("context %s: %w", c.Cluster, err)
		}
		provider = p.SecretsProviders()[0]
	}
	s, err := e.OpenSecrets(ctx, c, provider)
	if err != nil {
		return CASecretsResult{}, err
	}
	nonce, err := caNonce(e, c)
	if err != nil {
		return CASecretsResult{}, err
	}
	got, err := ensureCASecrets(ctx, s, c.Cluster, nonce, rand.Reader, time.Now())
	if err != nil {
		return CASecretsResult{}, err
	}
	// The caller reports each secret once, in its result.
	return CASecretsResult{Cluster: c.Cluster, Provider: s.Provider(), Secrets: got}, nil
}

// caNonce returns the context's CA nonce, drawing one and recording it in
// the contexts file first when the context has none: the record exists
// before any create request can carry the nonce.
func caNonce(e *openv.Env, c contexts.Context) (string, error) {
	if c.CANonce != "" {
		return c.CANonce, nil
	}
	fresh := contexts.NewNonce()
	err := e.SavedContexts().Update(func(f *contexts.File) error {
		cur, ok := f.Contexts[c.Cluster]
		if !ok || cur.Provider != c.Provider || cur.Bucket != c.Bucket {
			return fmt.Errorf("context %s changed while setup ran: run setup again", c.Cluster)
		}
		if cur.CANonce != "" {
			fresh = cur.CANonce
			return nil
		}
		cur.CANonce = fresh
		f.Contexts[c.Cluster] = cur
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("record the CA secrets' create nonce in context %s: %w: nothing was created", c.Cluster, err)
	}
	return fresh, nil
}

func ensureCASecrets(ctx context.Context, s secrets.Store, cluster, nonce string, random io.Reader, now time.Time) ([]CASecret, error) {
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
		action, err := createOnly(ctx, s, name, sec.value, nonce, sec.check)
		if err != nil {
			return out, err
		}
		out = append(out, CASecret{Name: name.String(), Action: action})
	}
	return out, nil
}

// createOnly stores value at name unless a value exists; a store that
// keeps create nonces stores nonce with it. An ambiguous create (an error
// other than "exists", e.g. a lost response) is resolved by reading the
// stored secret back: our value (a fresh random one) with our nonce means
// this request created it; anything else belongs to someone else, or to an
// earlier setup, and is kept.
func createOnly(ctx context.Context, s secrets.Store, name secrets.Name, value []byte, nonce string, check func([]byte) error) (string, error) {
	ns, withNonce := s.(secrets.NonceStore)
	var createErr error
	if withNonce {
		createErr = ns.CreateWithNonce(ctx, name, secrets.Value(value), nonce)
	} else {
		createErr = s.Create(ctx, name, secrets.Value(value))
	}
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
		if !withNonce {
			return "created", nil
		}
		got, err := ns.CreateNonce(ctx, name)
		if err != nil {
			return "", fmt.Errorf("create %s: %w; reading its create nonce back: %w: run setup again", name, createErr, err)
		}
		if contexts.ProvenBy(nonce, got) {
			return "created", nil
		}
		return "", fmt.Errorf("create %s: %w; it now holds this request's value without this context's create nonce: check who else writes it; destroy will keep it", name, createErr)
	}
	if err := check(stored); err != nil {
		return "", fmt.Errorf("%s already exists but is not valid (%w): it was not overwritten; restore it or destroy the cluster's CA secrets", name, err)
	}
	return "existing", nil
}
