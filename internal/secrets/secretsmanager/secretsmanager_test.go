// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package secretsmanager_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/secrets/secretsmanager"
	"podmin.dev/podmin/internal/secrets/secretstest"
)

// newStore points the real Secrets Manager client at a fake.
func newStore(t *testing.T) (*secretsmanager.Store, *secretstest.FakeSecretsManager) {
	fake := secretstest.NewFakeSecretsManager(t)
	client := sm.New(sm.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(fake.URL()),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDFAKE", "fake-secret-key", ""),
	})
	return secretsmanager.New(client), fake
}

func TestConformance(t *testing.T) {
	secretstest.Run(t, func(t *testing.T) secretstest.Target {
		s, fake := newStore(t)
		return secretstest.Target{Store: s, Calls: fake.Count}
	})
}

func name(t *testing.T, key string) secrets.Name {
	n, err := secrets.PodSecret("demo", "default", "web", key)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestBinaryUsesSecretBinary(t *testing.T) {
	s, fake := newStore(t)
	bin, txt := name(t, "bin"), name(t, "txt")
	if err := s.Create(t.Context(), bin, secrets.Value{0xff, 0, 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(t.Context(), txt, secrets.Value("text")); err != nil {
		t.Fatal(err)
	}
	if !fake.IsBinary(bin.String()) || fake.IsBinary(txt.String()) {
		t.Errorf("binary=%v text=%v, want SecretBinary only for the non-UTF-8 value", fake.IsBinary(bin.String()), fake.IsBinary(txt.String()))
	}
}

func TestListPagesWithNameFilter(t *testing.T) {
	s, fake := newStore(t)
	fake.PageSize = 2
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if err := s.Create(t.Context(), name(t, k), secrets.Value("v-"+k)); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := s.List(t.Context(), "demo", secrets.Filter{Namespace: "default", Pod: "web"})
	if err != nil || len(entries) != 5 {
		t.Fatalf("List = %d entries, %v", len(entries), err)
	}
	pages := 0
	for _, r := range fake.Requests() {
		if r == "ListSecrets" {
			pages++
		}
	}
	if pages != 3 {
		t.Errorf("List made %d ListSecrets calls, want 3 pages", pages)
	}
}

func TestDecryptionFailureIsClear(t *testing.T) {
	s, fake := newStore(t)
	n := name(t, "token")
	if err := s.Create(t.Context(), n, secrets.Value("kms-s3cret")); err != nil {
		t.Fatal(err)
	}
	fake.BreakKMS(n.String())
	_, err := s.Read(t.Context(), n)
	if !errors.Is(err, secrets.ErrKMS) || !strings.Contains(err.Error(), "DecryptionFailure") || strings.Contains(err.Error(), "kms-s3cret") {
		t.Errorf("Read = %v, want ErrKMS naming DecryptionFailure", err)
	}
}
