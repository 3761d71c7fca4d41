// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dryrun

import (
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
