// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package parameterstore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/secrets/parameterstore"
	"podmin.dev/podmin/internal/secrets/secretstest"
)

// newStore points the real SSM client at a fake.
func newStore(t *testing.T) (*parameterstore.Store, *secretstest.FakeSSM) {
	fake := secretstest.NewFakeSSM(t)
	client := ssm.New(ssm.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(fake.URL()),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDFAKE", "fake-secret-key", ""),
	})
	return parameterstore.New(client), fake
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

func TestWritesSecureStringReadsEveryType(t *testing.T) {
	s, fake := newStore(t)
	ctx := t.Context()
	n := name(t, "secure")
	if err := s.Create(ctx, n, secrets.Value("secure-value")); err != nil {
		t.Fatal(err)
	}
	if got := fake.Type(n.String()); got != "SecureString" {
		t.Errorf("created type %q, want SecureString", got)
	}
	fake.Seed("/demo/default/web/plain", "String", "log-level=debug")
	fake.Seed("/demo/default/web/list", "StringList", "a,b,c")
	for key, want := range map[string]string{"plain": "log-level=debug", "list": "a,b,c", "secure": "secure-value"} {
		got, err := s.Read(ctx, name(t, key))
		if err != nil || string(got) != want {
			t.Errorf("Read(%s) = %d bytes, %v", key, len(got), err)
		}
	}
	// Updating a String parameter makes it a SecureString.
	if err := s.Update(ctx, name(t, "plain"), secrets.Value("now-secret")); err != nil {
		t.Fatal(err)
	}
	if got := fake.Type("/demo/default/web/plain"); got != "SecureString" {
		t.Errorf("updated type %q, want SecureString", got)
	}
}

func TestListPagesRecursively(t *testing.T) {
	s, fake := newStore(t)
	fake.PageSize = 2
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if err := s.Create(t.Context(), name(t, k), secrets.Value("v-"+k)); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := s.List(t.Context(), "demo", secrets.Filter{})
	if err != nil || len(entries) != 5 {
		t.Fatalf("List = %d entries, %v", len(entries), err)
	}
	pages := 0
	for _, r := range fake.Requests() {
		if r == "GetParametersByPath" {
			pages++
		}
	}
	if pages != 3 {
		t.Errorf("List made %d GetParametersByPath calls, want 3 pages", pages)
	}
}

func TestKMSFailureIsClear(t *testing.T) {
	for _, code := range []string{"InvalidKeyId", "AccessDeniedException"} {
		t.Run(code, func(t *testing.T) {
			s, fake := newStore(t)
			n := name(t, "token")
			if err := s.Create(t.Context(), n, secrets.Value("kms-s3cret")); err != nil {
				t.Fatal(err)
			}
			fake.BreakKMS(n.String(), code)
			_, err := s.Read(t.Context(), n)
			if !errors.Is(err, secrets.ErrKMS) || !strings.Contains(err.Error(), "grant these credentials kms:Encrypt/kms:Decrypt") ||
				!strings.Contains(err.Error(), code) || strings.Contains(err.Error(), "kms-s3cret") {
				t.Errorf("Read = %v, want ErrKMS naming %s and kms:Decrypt", err, code)
			}
			// Existence checks do not decrypt, so update still works.
			if err := s.Update(t.Context(), n, secrets.Value("x")); err != nil {
				t.Errorf("Update = %v", err)
			}
		})
	}
}

func TestUpdateChecksExistenceWithoutDecryption(t *testing.T) {
	s, fake := newStore(t)
	if err := s.Update(t.Context(), name(t, "absent"), secrets.Value("v")); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("Update(absent) = %v", err)
	}
	if got := fake.Requests(); !slices.Equal(got, []string{"GetParameter"}) {
		t.Errorf("requests = %q, want only the existence check", got)
	}
}

// The create nonce travels as a tag of the same PutParameter (one request,
// no window without it) and is read back with ListTagsForResource; a tag
// read that fails is an error, never "no nonce".
func TestCreateNonceIsATagOfTheCreate(t *testing.T) {
	s, fake := newStore(t)
	n, err := secrets.InternalSecret("demo", secrets.WorkloadCAKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateWithNonce(t.Context(), n, secrets.Value("k"), "n0nce"); err != nil {
		t.Fatal(err)
	}
	if got := fake.Requests(); !slices.Equal(got, []string{"PutParameter"}) {
		t.Errorf("requests = %q, want one PutParameter", got)
	}
	if got := fake.Tags(n.String()); got[secrets.CreateNonceTag] != "n0nce" || fake.Type(n.String()) != "SecureString" {
		t.Fatalf("stored tags %v, type %s", got, fake.Type(n.String()))
	}
	if got, err := s.CreateNonce(t.Context(), n); err != nil || got != "n0nce" {
		t.Fatalf("CreateNonce = %q, %v", got, err)
	}
	fake.BreakTags(n.String(), "AccessDeniedException")
	got, err := s.CreateNonce(t.Context(), n)
	if err == nil || errors.Is(err, secrets.ErrNotFound) || got != "" || !strings.Contains(err.Error(), "ssm:ListTagsForResource") {
		t.Fatalf("CreateNonce with tags unreadable = %q, %v; want an access error naming ssm:ListTagsForResource", got, err)
	}
}
