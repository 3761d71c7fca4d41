// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package secrets

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/secrets"
)

func TestEnsureCASecretsEveryProvider(t *testing.T) {
	for _, provider := range []string{secrets.Local, secrets.ParameterStore, secrets.SecretsManager} {
		t.Run(provider, func(t *testing.T) {
			env, ctx := newSecretsEnv(t), t.Context()
			res, err := EnsureCASecrets(ctx, env.Env, CASecretsOptions{Provider: provider})
			if err != nil {
				t.Fatal(err)
			}
			want := []CASecret{{"/demo/_system/workload-ca-key", "created"}, {"/demo/_system/cluster-ca", "created"}}
			if res.Provider != provider || len(res.Secrets) != 2 || res.Secrets[0] != want[0] || res.Secrets[1] != want[1] {
				t.Fatalf("first ensure = %+v", res)
			}
			s, err := env.Secrets(ctx, mustContext(t, env.Env), provider)
			if err != nil {
				t.Fatal(err)
			}
			keyName, _ := secrets.InternalSecret("demo", secrets.WorkloadCAKey)
			caName, _ := secrets.InternalSecret("demo", secrets.ClusterCA)
			key1, err := s.Read(ctx, keyName)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pki.ParseWorkloadKey(key1); err != nil {
				t.Fatal(err)
			}
			ca1, _ := s.Read(ctx, caName)
			if _, err := pki.ParseClusterCA(ca1, "demo"); err != nil {
				t.Fatal(err)
			}
			// Setup again: nothing is overwritten.
			res, err = EnsureCASecrets(ctx, env.Env, CASecretsOptions{Provider: provider})
			if err != nil || res.Secrets[0].Action != "existing" || res.Secrets[1].Action != "existing" {
				t.Fatalf("second ensure = %+v, %v", res, err)
			}
			key2, _ := s.Read(ctx, keyName)
			ca2, _ := s.Read(ctx, caName)
			if string(key1) != string(key2) || string(ca1) != string(ca2) {
				t.Fatal("a CA secret was overwritten")
			}
			// Internal keys stay out of listings.
			list, err := ListSecrets(ctx, env.Env, ListSecretsOptions{Provider: provider, System: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range list.Secrets {
				if strings.Contains(e.Name, "-ca") {
					t.Errorf("listed internal key %s", e.Name)
				}
			}
		})
	}
}

func mustContext(t *testing.T, e *openv.Env) contexts.Context {
	t.Helper()
	c, err := e.CurrentContext()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ambiguousStore performs a Create and then reports a failure, as a lost
// response would; rival, when set, stores another value first.
type ambiguousStore struct {
	secrets.Store
	rival []byte
}

func (a ambiguousStore) Create(ctx context.Context, n secrets.Name, v secrets.Value) error {
	if a.rival != nil {
		_ = a.Store.Create(ctx, n, secrets.Value(a.rival))
		return a.Store.Create(ctx, n, v)
	}
	if err := a.Store.Create(ctx, n, v); err != nil {
		return err
	}
	return errors.New("connection reset by peer")
}

func TestEnsureCASecretsAmbiguousCreate(t *testing.T) {
	env, ctx := newSecretsEnv(t), t.Context()
	base, err := env.Secrets(ctx, mustContext(t, env.Env), secrets.Local)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	// Ours: the write landed, the response was lost.
	got, err := ensureCASecrets(ctx, ambiguousStore{Store: base}, "demo", contexts.NewNonce(), rand.Reader, now)
	if err != nil || got[0].Action != "created" || got[1].Action != "created" {
		t.Fatalf("ambiguous create = %+v, %v", got, err)
	}
	// Someone else's: a different, valid value won the race.
	rivalKey, _ := pki.GenerateWorkloadKey(rand.Reader)
	other := newSecretsEnv(t)
	otherBase, _ := other.Secrets(ctx, mustContext(t, other.Env), secrets.Local)
	got, err = ensureCASecrets(ctx, ambiguousStore{Store: otherBase, rival: rivalKey}, "demo", contexts.NewNonce(), rand.Reader, now)
	if err == nil {
		// The rival's cluster CA value is a workload key, which is invalid
		// as a cluster CA: reported, not overwritten.
		t.Fatalf("invalid rival value accepted: %+v", got)
	}
	if len(got) != 1 || got[0].Action != "existing" || !strings.Contains(err.Error(), "not overwritten") {
		t.Fatalf("rival: %+v, %v", got, err)
	}
	keyName, _ := secrets.InternalSecret("demo", secrets.WorkloadCAKey)
	if v, _ := otherBase.Read(ctx, keyName); string(v) != string(rivalKey) {
		t.Fatal("rival's key overwritten")
	}
	// Without a provider the CA secrets go to the system store of the
	// context's cloud provider: local for a local context.
	fourth := newSecretsEnv(t)
	if res, err := EnsureCASecrets(ctx, fourth.Env, CASecretsOptions{}); err != nil || res.Provider != secrets.Local {
		t.Fatalf("default provider: %+v %v", res, err)
	}
	// A wrong-size stored key is reported, never replaced.
	third := newSecretsEnv(t)
	thirdBase, _ := third.Secrets(ctx, mustContext(t, third.Env), secrets.Local)
	if err := thirdBase.Create(ctx, keyName, secrets.Value("AAAA")); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureCASecrets(ctx, third.Env, CASecretsOptions{}); err == nil || !strings.Contains(err.Error(), "not 32") {
		t.Fatalf("wrong-size key: %v", err)
	}
}

// ambiguousNonceStore is ambiguousStore for a store that keeps create
// nonces: rival, when set, is created first with rivalNonce.
type ambiguousNonceStore struct {
	secrets.NonceStore
	rival      map[string][]byte
	rivalNonce string
}

func (a ambiguousNonceStore) CreateWithNonce(ctx context.Context, n secrets.Name, v secrets.Value, nonce string) error {
	if r := a.rival[n.Key()]; r != nil {
		_ = a.NonceStore.CreateWithNonce(ctx, n, secrets.Value(r), a.rivalNonce)
		return a.NonceStore.CreateWithNonce(ctx, n, v, nonce)
	}
	if err := a.NonceStore.CreateWithNonce(ctx, n, v, nonce); err != nil {
		return err
	}
	return errors.New("connection reset by peer")
}

// An ambiguous create is reconciled against the nonce it carried: our
// value with our nonce is ours; a rival's secret with its own nonce is kept
// and never counted as created.
func TestEnsureCASecretsAmbiguousCreateWithNonce(t *testing.T) {
	env, ctx := newSecretsEnv(t), t.Context()
	base, err := env.Secrets(ctx, mustContext(t, env.Env), secrets.Local)
	if err != nil {
		t.Fatal(err)
	}
	ns := base.(secrets.NonceStore)
	now := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	ours := contexts.NewNonce()
	got, err := ensureCASecrets(ctx, ambiguousNonceStore{NonceStore: ns}, "demo", ours, rand.Reader, now)
	if err != nil || got[0].Action != "created" || got[1].Action != "created" {
		t.Fatalf("ambiguous create = %+v, %v", got, err)
	}
	for _, k := range []string{secrets.WorkloadCAKey, secrets.ClusterCA} {
		n, _ := secrets.InternalSecret("demo", k)
		if nonce, err := ns.CreateNonce(ctx, n); err != nil || nonce != ours {
			t.Fatalf("%s carries %q, %v", k, nonce, err)
		}
	}
	other := newSecretsEnv(t)
	otherBase, _ := other.Secrets(ctx, mustContext(t, other.Env), secrets.Local)
	rivalKey, _ := pki.GenerateWorkloadKey(rand.Reader)
	rivalCA, _ := pki.GenerateClusterCA(rand.Reader, "demo", now)
	theirs := contexts.NewNonce()
	got, err = ensureCASecrets(ctx, ambiguousNonceStore{NonceStore: otherBase.(secrets.NonceStore),
		rival: map[string][]byte{secrets.WorkloadCAKey: rivalKey, secrets.ClusterCA: rivalCA}, rivalNonce: theirs}, "demo", ours, rand.Reader, now)
	if err != nil || got[0].Action != "existing" || got[1].Action != "existing" {
		t.Fatalf("rival won: %+v, %v", got, err)
	}
	n, _ := secrets.InternalSecret("demo", secrets.ClusterCA)
	if nonce, _ := otherBase.(secrets.NonceStore).CreateNonce(ctx, n); nonce != theirs {
		t.Fatalf("the rival's secret carries %q, not its own nonce", nonce)
	}
}
