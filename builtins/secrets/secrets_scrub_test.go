// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package secrets

import (
	"errors"
	"testing"

	"podmin.dev/podmin/internal/scrub"
	"podmin.dev/podmin/internal/secrets"
)

// TestSecretValuesRegistered checks that create, update and read register
// the values they handle with Env.Scrub, and that read returns the value.
func TestSecretValuesRegistered(t *testing.T) {
	env, ctx := newSecretsEnv(t), t.Context()
	env.Scrub = scrub.New()
	at := SecretOptions{Key: "token", For: "web"}
	if _, err := CreateSecret(ctx, env.Env, SecretValueOptions{SecretOptions: at, Value: secrets.Value("created-value-1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := UpdateSecret(ctx, env.Env, SecretValueOptions{SecretOptions: at, Value: secrets.Value("updated-value-2")}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"created-value-1", "updated-value-2"} {
		if got := env.Scrub.String("x " + v); got != "x <secret token>" {
			t.Errorf("%s not registered: %q", v, got)
		}
	}
	// A value another process stored is registered when it is read.
	fresh := scrub.New()
	env.Scrub = fresh
	v, res, err := ReadSecret(ctx, env.Env, at)
	if err != nil || string(v) != "updated-value-2" || res.Action != "read" || res.Name != "/demo/default/web/token" {
		t.Fatalf("read = %q %+v %v", string(v), res, err)
	}
	if fresh.String("updated-value-2") != "<secret token>" {
		t.Error("read did not register the value")
	}
	if _, _, err := ReadSecret(ctx, env.Env, SecretOptions{Key: "nope", For: "web"}); !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("read of a missing secret = %v", err)
	}
}
