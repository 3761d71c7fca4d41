// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"

	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/secrets"
)

// clusterCALifetime is how long the cluster coordination CA lasts: it is
// long-lived and replaced only by destroy and a new setup.
const clusterCALifetime = 10 * 365 * 24 * time.Hour

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

// workloadCAKey returns a fresh 32-byte Ed25519 seed, base64-encoded so the
// value is text (Parameter Store stores UTF-8 only).
func workloadCAKey() ([]byte, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, err
	}
	return []byte(base64.StdEncoding.EncodeToString(seed)), nil
}

// clusterCA returns a fresh self-signed Ed25519 coordination CA as one PEM
// value: the CERTIFICATE block, then the PKCS#8 PRIVATE KEY block.
func clusterCA(cluster string, now time.Time) ([]byte, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cluster + " cluster CA", Organization: []string{"Podmin"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(clusterCALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		return nil, err
	}
	key, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})...), nil
}

// ensureCASecrets create-only stores the workload CA key and the cluster
// CA. An existing secret is kept as it is, so a setup after teardown keeps
// the cluster's trust.
func (e *Env) ensureCASecrets(ctx context.Context, c contexts.Context) ([]SecretAction, error) {
	store, err := e.caStore(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []SecretAction
	for _, key := range []string{secrets.WorkloadCAKey, secrets.ClusterCA} {
		n, err := secrets.InternalSecret(c.Cluster, key)
		if err != nil {
			return nil, err
		}
		var v []byte
		if key == secrets.WorkloadCAKey {
			v, err = workloadCAKey()
		} else {
			v, err = clusterCA(c.Cluster, time.Now())
		}
		if err != nil {
			return nil, fmt.Errorf("generate %s: %w", n, err)
		}
		e.Scrub.Add(key, v)
		switch err := store.Create(ctx, n, secrets.Value(v)); {
		case err == nil:
			e.progress("stored %s in %s", n, store.Provider())
			out = append(out, SecretAction{Name: n.String(), Action: "created"})
		case errors.Is(err, secrets.ErrExists):
			out = append(out, SecretAction{Name: n.String(), Action: "kept"})
		default:
			return out, fmt.Errorf("store %s in %s: %w", n, store.Provider(), err)
		}
	}
	return out, nil
}

// destroyCASecrets permanently deletes both CA secrets; an absent one is
// already gone, so an interrupted destroy can run again.
func (e *Env) destroyCASecrets(ctx context.Context, c contexts.Context) ([]SecretAction, error) {
	store, err := e.caStore(ctx, c)
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
			e.progress("destroyed %s in %s", n, store.Provider())
			out = append(out, SecretAction{Name: n.String(), Action: "destroyed"})
		case errors.Is(err, secrets.ErrNotFound):
			out = append(out, SecretAction{Name: n.String(), Action: "absent"})
		default:
			return out, fmt.Errorf("destroy %s in %s: %w", n, store.Provider(), err)
		}
	}
	return out, nil
}

func (e *Env) caStore(ctx context.Context, c contexts.Context) (secrets.Store, error) {
	if e.Secrets == nil {
		return nil, errors.New("no secrets providers are configured: the cluster's CA secrets cannot be stored")
	}
	p := caSecretsProvider(c)
	s, err := e.Secrets(ctx, c, p)
	if err != nil {
		return nil, fmt.Errorf("open secrets provider %s for the cluster's CA secrets: %w", p, err)
	}
	return s, nil
}
