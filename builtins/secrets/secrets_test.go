// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package secrets

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	ctxops "podmin.dev/podmin/builtins/contexts"
	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/builtins/openv/openvtest"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/secrets"
	localsecrets "podmin.dev/podmin/internal/secrets/local"
	"podmin.dev/podmin/internal/secrets/parameterstore"
	"podmin.dev/podmin/internal/secrets/secretsmanager"
	"podmin.dev/podmin/internal/secrets/secretstest"
)

// secretsEnv is a connected local cluster "demo" whose secrets factory
// opens the local store and the real AWS clients pointed at fakes.
type secretsEnv struct {
	*openv.Env
	ssm    *secretstest.FakeSSM
	sm     *secretstest.FakeSecretsManager
	opened []string
}

func newSecretsEnv(t *testing.T) *secretsEnv {
	t.Helper()
	se := &secretsEnv{Env: openvtest.NewEnv(t), ssm: secretstest.NewFakeSSM(t), sm: secretstest.NewFakeSecretsManager(t)}
	if _, err := ctxops.Connect(t.Context(), se.Env, ctxops.ConnectOptions{Cluster: "demo", Provider: "local", Bucket: "demo-bucket"}); err != nil {
		t.Fatal(err)
	}
	creds := credentials.NewStaticCredentialsProvider("AKIDFAKE", "fake-secret-key", "")
	se.Secrets = func(_ context.Context, c contexts.Context, provider string) (secrets.Store, error) {
		se.opened = append(se.opened, provider)
		switch provider {
		case secrets.Local:
			return localsecrets.New(filepath.Join(se.Dirs.Data, "secrets")), nil
		case secrets.ParameterStore:
			return parameterstore.New(ssm.New(ssm.Options{Region: "us-east-1", BaseEndpoint: awssdk.String(se.ssm.URL()), Credentials: creds})), nil
		case secrets.SecretsManager:
			return secretsmanager.New(sm.New(sm.Options{Region: "us-east-1", BaseEndpoint: awssdk.String(se.sm.URL()), Credentials: creds})), nil
		}
		return nil, fmt.Errorf("test factory: no provider %q", provider)
	}
	return se
}

func TestSecretLifecycle(t *testing.T) {
	for _, provider := range []string{secrets.Local, secrets.ParameterStore, secrets.SecretsManager} {
		t.Run(provider, func(t *testing.T) {
			env, ctx := newSecretsEnv(t), t.Context()
			const v1, v2 = "lifecycle-s3cret-1", "lifecycle-s3cret-2"
			at := SecretOptions{Key: "db-password", For: "web", Namespace: "product", Provider: provider}
			res, err := CreateSecret(ctx, env.Env, SecretValueOptions{SecretOptions: at, Value: secrets.Value(v1)})
			if err != nil {
				t.Fatal(err)
			}
			if res != (SecretResult{Cluster: "demo", Provider: provider, Name: "/demo/product/web/db-password", Action: "created"}) {
				t.Errorf("create = %+v", res)
			}
			_, err = CreateSecret(ctx, env.Env, SecretValueOptions{SecretOptions: at, Value: secrets.Value(v2)})
			if !errors.Is(err, secrets.ErrExists) {
				t.Errorf("second create = %v, want ErrExists", err)
			}
			if _, err := UpdateSecret(ctx, env.Env, SecretValueOptions{SecretOptions: at, Value: secrets.Value(v2)}); err != nil {
				t.Fatal(err)
			}
			list, err := ListSecrets(ctx, env.Env, ListSecretsOptions{For: "web", Namespace: "product", Provider: provider})
			if err != nil || len(list.Secrets) != 1 || list.Secrets[0].Name != "/demo/product/web/db-password" || list.Provider != provider {
				t.Errorf("list = %+v, %v", list, err)
			}
			if s := fmt.Sprintf("%+v", list); strings.Contains(s, v1) || strings.Contains(s, v2) {
				t.Errorf("list shows a value: %s", s)
			}
			_, err = DestroySecret(ctx, env.Env, DestroySecretOptions{SecretOptions: at, Confirm: "other"})
			if err == nil || !strings.Contains(err.Error(), `needs confirmation: confirm with the cluster ID "demo"`) {
				t.Errorf("destroy without confirmation = %v", err)
			}
			if res, err := DestroySecret(ctx, env.Env, DestroySecretOptions{SecretOptions: at, Confirm: "demo"}); err != nil || res.Action != "destroyed" {
				t.Fatalf("destroy = %+v, %v", res, err)
			}
			if list, _ := ListSecrets(ctx, env.Env, ListSecretsOptions{Provider: provider}); len(list.Secrets) != 0 {
				t.Errorf("after destroy: %+v", list.Secrets)
			}
		})
	}
}

func TestSecretProviderDefaultsToContext(t *testing.T) {
	env := newSecretsEnv(t)
	res, err := CreateSecret(t.Context(), env.Env, SecretValueOptions{SecretOptions: SecretOptions{Key: "k", For: "web"}, Value: secrets.Value("v")})
	if err != nil || res.Provider != secrets.Local || res.Name != "/demo/default/web/k" {
		t.Fatalf("create = %+v, %v; want the context's local provider and namespace default", res, err)
	}
}

func TestSecretDeleteRestore(t *testing.T) {
	env, ctx := newSecretsEnv(t), t.Context()
	at := SecretOptions{Key: "token", For: "web", Provider: secrets.SecretsManager}
	if _, err := CreateSecret(ctx, env.Env, SecretValueOptions{SecretOptions: at, Value: secrets.Value("v")}); err != nil {
		t.Fatal(err)
	}
	res, err := DeleteSecret(ctx, env.Env, at)
	if err != nil || res.Action != "scheduled-for-deletion" || res.RecoveryWindowDays != 30 {
		t.Fatalf("delete = %+v, %v", res, err)
	}
	list, _ := ListSecrets(ctx, env.Env, ListSecretsOptions{Provider: secrets.SecretsManager})
	if len(list.Secrets) != 1 || list.Secrets[0].DeletionScheduled.IsZero() {
		t.Errorf("list after delete = %+v", list.Secrets)
	}
	if res, err := RestoreSecret(ctx, env.Env, at); err != nil || res.Action != "restored" {
		t.Fatalf("restore = %+v, %v", res, err)
	}
	for _, provider := range []string{secrets.ParameterStore, secrets.Local} {
		at.Provider = provider
		want := provider + " has no delete/restore: use destroy to delete permanently"
		if _, err := DeleteSecret(ctx, env.Env, at); !errors.Is(err, secrets.ErrUnsupported) || !strings.Contains(err.Error(), want) {
			t.Errorf("delete on %s = %v, want %q", provider, err, want)
		}
		if _, err := RestoreSecret(ctx, env.Env, at); !errors.Is(err, secrets.ErrUnsupported) || !strings.Contains(err.Error(), want) {
			t.Errorf("restore on %s = %v, want %q", provider, err, want)
		}
	}
}

// TestSecretBadInputMakesNoCalls checks that every rejected input fails
// before any provider request, with an error that names the fix and never
// the value.
func TestSecretBadInputMakesNoCalls(t *testing.T) {
	const secret = "bad-input-s3cret"
	big := func(n int) secrets.Value { return secrets.Value(strings.Repeat("s", n)) }
	tests := []struct {
		name, want string
		call       func(*openv.Env) error
	}{
		{"key with slash", `"a/b" is not a safe key`, create(SecretOptions{Key: "a/b", For: "web"}, secrets.Value(secret))},
		{"key dot-dot", `".." is not a safe key`, create(SecretOptions{Key: "..", For: "web"}, secrets.Value(secret))},
		{"empty key", "no key given", create(SecretOptions{Key: "", For: "web"}, secrets.Value(secret))},
		{"key with NUL", `"a\x00" is not a safe key`, create(SecretOptions{Key: "a\x00", For: "web"}, secrets.Value(secret))},
		{"no pod", "no Pod given: pass --for POD", create(SecretOptions{Key: "k"}, secrets.Value(secret))},
		{"system namespace", `"_system" is not a namespace`, create(SecretOptions{Key: "k", For: "web", Namespace: "_system"}, secrets.Value(secret))},
		{"internal system key", `"workload-ca-key" is not a system key you can manage`, create(SecretOptions{Key: "workload-ca-key", System: true}, secrets.Value(secret))},
		{"system with pod", "--system addresses a system key of the cluster (/CLUSTER/_system/KEY), which belongs to no Pod: omit --for and --namespace",
			create(SecretOptions{Key: "otel-logs-headers", For: "web", System: true}, secrets.Value(secret))},
		{"unknown provider", `unknown secrets provider "gcp-secrets": use one of ["aws-parameter-store" "aws-secrets-manager" "local"]`,
			create(SecretOptions{Key: "k", For: "web", Provider: "gcp-secrets"}, secrets.Value(secret))},
		{"parameter store too large", "the value is 4097 bytes, more than the 4096 bytes aws-parameter-store accepts: store a smaller value or use --provider aws-secrets-manager",
			create(SecretOptions{Key: "k", For: "web", Provider: secrets.ParameterStore}, big(4097))},
		{"secrets manager too large", "the value is 65537 bytes, more than the 65536 bytes aws-secrets-manager accepts",
			create(SecretOptions{Key: "k", For: "web", Provider: secrets.SecretsManager}, big(65537))},
		{"parameter store not UTF-8", "the value is not valid UTF-8, which aws-parameter-store requires",
			create(SecretOptions{Key: "k", For: "web", Provider: secrets.ParameterStore}, secrets.Value("\xff"+secret))},
		{"update not UTF-8", "the value is not valid UTF-8",
			func(e *openv.Env) error {
				_, err := UpdateSecret(context.Background(), e, SecretValueOptions{SecretOptions: SecretOptions{Key: "k", For: "web", Provider: secrets.ParameterStore}, Value: secrets.Value("\xfe" + secret)})
				return err
			}},
		{"empty value", "the value is empty", create(SecretOptions{Key: "k", For: "web", Provider: secrets.SecretsManager}, nil)},
		{"unsupported delete", "aws-parameter-store has no delete/restore: use destroy to delete permanently",
			func(e *openv.Env) error {
				_, err := DeleteSecret(context.Background(), e, SecretOptions{Key: "k", For: "web", Provider: secrets.ParameterStore})
				return err
			}},
		{"destroy unconfirmed", `confirm with the cluster ID "demo"`,
			func(e *openv.Env) error {
				_, err := DestroySecret(context.Background(), e, DestroySecretOptions{SecretOptions: SecretOptions{Key: "k", For: "web", Provider: secrets.SecretsManager}})
				return err
			}},
		{"list bad namespace", `"Bad" is not a valid namespace`,
			func(e *openv.Env) error {
				_, err := ListSecrets(context.Background(), e, ListSecretsOptions{Namespace: "Bad", Provider: secrets.ParameterStore})
				return err
			}},
		{"list system with pod", "omit --for and --namespace with --system",
			func(e *openv.Env) error {
				_, err := ListSecrets(context.Background(), e, ListSecretsOptions{For: "web", System: true, Provider: secrets.SecretsManager})
				return err
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newSecretsEnv(t)
			err := tc.call(env.Env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q contains the value", err)
			}
			if n := env.ssm.Count() + env.sm.Count(); n != 0 {
				t.Errorf("the fakes saw %d requests (%q %q), want none", n, env.ssm.Requests(), env.sm.Requests())
			}
		})
	}
}

func create(opts SecretOptions, v secrets.Value) func(*openv.Env) error {
	return func(e *openv.Env) error {
		_, err := CreateSecret(context.Background(), e, SecretValueOptions{SecretOptions: opts, Value: v})
		return err
	}
}

func TestSecretsNeedAFactory(t *testing.T) {
	env := newSecretsEnv(t)
	env.Secrets = nil
	err := CheckSecret(env.Env, SecretOptions{Key: "k", For: "web"})
	if !errors.Is(err, openv.ErrNoSecrets) {
		t.Errorf("CheckSecret without a factory = %v, want openv.ErrNoSecrets", err)
	}
}

func TestSecretValueIsRedactedWhenFormatted(t *testing.T) {
	opts := SecretValueOptions{SecretOptions: SecretOptions{Key: "k"}, Value: secrets.Value("formatted-s3cret")}
	for _, s := range []string{fmt.Sprintf("%v", opts), fmt.Sprintf("%+v", opts), fmt.Sprintf("%s", opts.Value), fmt.Sprintf("%x", opts.Value), fmt.Sprintf("%q", opts.Value)} {
		if strings.Contains(s, "formatted-s3cret") || strings.Contains(s, fmt.Sprintf("%x", []byte("formatted-s3cret"))) {
			t.Errorf("formatted options show the value: %s", s)
		}
	}
}
