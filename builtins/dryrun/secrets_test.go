// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dryrun

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"podmin.dev/podmin/internal/objstore/overlay"
	"podmin.dev/podmin/internal/secrets"
	localsecrets "podmin.dev/podmin/internal/secrets/local"
	"podmin.dev/podmin/internal/secrets/secretsmanager"
	"podmin.dev/podmin/internal/secrets/secretstest"
)

func recording(real secrets.Store) *secretStore {
	return &secretStore{real: real, seq: &overlay.Sequence{}, now: time.Now, layer: map[string]*secretState{}}
}

// TestSecretsConformance holds the recording secrets store to the secrets
// contract, over the local store and over Secrets Manager (which has a
// recovery window), and checks that the real store is never written.
func TestSecretsConformance(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		secretstest.Run(t, func(t *testing.T) secretstest.Target {
			root := filepath.Join(t.TempDir(), "secrets")
			s := recording(localsecrets.New(root))
			t.Cleanup(func() {
				n := 0
				_ = filepath.WalkDir(root, func(_ string, _ fs.DirEntry, err error) error {
					if err == nil {
						n++
					}
					return nil
				})
				if n > 0 {
					t.Errorf("the recording store wrote %d entries below the real store", n)
				}
			})
			return secretstest.Target{Store: s, Calls: func() int { return len(s.records()) }}
		})
	})
	t.Run("secrets-manager", func(t *testing.T) {
		secretstest.Run(t, func(t *testing.T) secretstest.Target {
			fake := secretstest.NewFakeSecretsManager(t)
			client := sm.New(sm.Options{
				Region: "us-east-1", BaseEndpoint: aws.String(fake.URL()),
				Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKE", "fake-secret-key", ""),
			})
			s := recording(secretsmanager.New(client))
			return secretstest.Target{Store: s, Calls: func() int { return len(s.records()) }}
		})
	})
}

// A dry run reads a secret's create nonce from the real store until the
// run itself changes the secret, and never touches the real one.
func TestRecordingStoreReadsTheRealCreateNonce(t *testing.T) {
	ctx := t.Context()
	real := localsecrets.New(t.TempDir())
	n, err := secrets.InternalSecret("demo", secrets.ClusterCA)
	if err != nil {
		t.Fatal(err)
	}
	if err := real.CreateWithNonce(ctx, n, secrets.Value("ca"), "theirs"); err != nil {
		t.Fatal(err)
	}
	s := recording(real)
	if got, err := s.CreateNonce(ctx, n); err != nil || got != "theirs" {
		t.Fatalf("CreateNonce = %q, %v; want the real store's", got, err)
	}
	if err := s.Destroy(ctx, n); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateNonce(ctx, n); !errors.Is(err, secrets.ErrNotFound) {
		t.Fatalf("after a recorded destroy: %v, want ErrNotFound", err)
	}
	if err := s.CreateWithNonce(ctx, n, secrets.Value("new"), "ours"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.CreateNonce(ctx, n); err != nil || got != "ours" {
		t.Fatalf("after a recorded create: %q, %v", got, err)
	}
	if got, err := real.CreateNonce(ctx, n); err != nil || got != "theirs" {
		t.Fatalf("the real store now carries %q, %v", got, err)
	}
}
