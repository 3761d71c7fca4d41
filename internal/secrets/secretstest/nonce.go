// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package secretstest

import (
	"errors"
	"testing"

	"podmin.dev/podmin/internal/secrets"
)

// testCreateNonce checks a store that keeps create nonces: a secret carries
// exactly the nonce of the create that made it, a plain create or a losing
// create carries none of the caller's, an update keeps it and a destroy
// takes it along.
func testCreateNonce(t *testing.T, tg Target) {
	s, ok := tg.Store.(secrets.NonceStore)
	if !ok {
		t.Skipf("%s keeps no create nonces", tg.Store.Provider())
	}
	ctx := t.Context()
	n, err := secrets.InternalSecret(Cluster, secrets.ClusterCA)
	if err != nil {
		t.Fatal(err)
	}
	const ours, theirs = "nonce-ours-0123456789abcdef", "nonce-theirs-0123456789abcdef"
	if _, err := s.CreateNonce(ctx, n); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("nonce of an absent secret: %v, want ErrNotFound", err)
	}
	if err := s.CreateWithNonce(ctx, n, secrets.Value("v1"), ""); !errors.Is(err, secrets.ErrInvalid) {
		t.Fatalf("empty nonce: %v, want ErrInvalid", err)
	}
	if err := s.CreateWithNonce(ctx, n, secrets.Value("v1"), ours); err != nil {
		t.Fatal(err)
	}
	if got, err := s.CreateNonce(ctx, n); err != nil || got != ours {
		t.Fatalf("nonce %q, %v; want %q", got, err, ours)
	}
	// Another creator loses the race and leaves no mark.
	if err := s.CreateWithNonce(ctx, n, secrets.Value("v2"), theirs); !errors.Is(err, secrets.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	if err := s.Update(ctx, n, secrets.Value("v3")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.CreateNonce(ctx, n); err != nil || got != ours {
		t.Fatalf("after a lost create and an update: nonce %q, %v; want %q", got, err, ours)
	}
	if err := s.Destroy(ctx, n); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateNonce(ctx, n); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("nonce of a destroyed secret: %v, want ErrNotFound", err)
	}
	// A secret created without a nonce, where one carried ours before,
	// carries none.
	if err := s.Create(ctx, n, secrets.Value("v4")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.CreateNonce(ctx, n); err != nil || got != "" {
		t.Fatalf("plain create: nonce %q, %v; want none", got, err)
	}
	if _, err := s.CreateNonce(ctx, secrets.Name{}); !errors.Is(err, secrets.ErrInvalid) {
		t.Fatalf("zero name: %v, want ErrInvalid", err)
	}
}
