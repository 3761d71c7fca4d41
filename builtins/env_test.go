// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"podmin.dev/podmin/builtins/openv/openvtest"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/objstore/objstoretest"
	"podmin.dev/podmin/internal/secrets"
	localsecrets "podmin.dev/podmin/internal/secrets/local"
	"podmin.dev/podmin/internal/secrets/secretsmanager"
	"podmin.dev/podmin/internal/secrets/secretstest"
)

// testEnv is the composed environment over temporary state directories;
// the tests here cross families (connect, then destroy through the
// lifecycle), which only the composition wires together.
func testEnv(t *testing.T) *Env { return (*Env)(openvtest.NewEnv(t)) }

// useVersityGW points the AWS provider at a real S3-compatible server.
func useVersityGW(t *testing.T) *objstoretest.S3Server { return objstoretest.UseVersityGW(t) }

// newSecretsEnv is a connected local cluster "demo" whose secrets factory
// opens the local store and the real AWS Secrets Manager client pointed at
// a fake.
func newSecretsEnv(t *testing.T) *Env {
	t.Helper()
	env := testEnv(t)
	if _, err := env.Connect(t.Context(), ConnectOptions{Cluster: "demo", Provider: "local", Bucket: "demo-bucket"}); err != nil {
		t.Fatal(err)
	}
	fake := secretstest.NewFakeSecretsManager(t)
	creds := credentials.NewStaticCredentialsProvider("AKIDFAKE", "fake-secret-key", "")
	env.Secrets = func(_ context.Context, c contexts.Context, provider string) (secrets.Store, error) {
		switch provider {
		case secrets.Local:
			return localsecrets.New(filepath.Join(env.Dirs.Data, "secrets")), nil
		case secrets.SecretsManager:
			return secretsmanager.New(sm.New(sm.Options{Region: "us-east-1", BaseEndpoint: awssdk.String(fake.URL()), Credentials: creds})), nil
		}
		return nil, fmt.Errorf("test factory: no provider %q", provider)
	}
	return env
}
