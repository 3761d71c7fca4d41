// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package secretsmanager

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/smithy-go"

	"podmin.dev/podmin/internal/secrets"
)

// API is the part of the Secrets Manager client the store uses;
// *secretsmanager.Client has it.
type API interface {
	CreateSecret(ctx context.Context, in *sm.CreateSecretInput, optFns ...func(*sm.Options)) (*sm.CreateSecretOutput, error)
	PutSecretValue(ctx context.Context, in *sm.PutSecretValueInput, optFns ...func(*sm.Options)) (*sm.PutSecretValueOutput, error)
	GetSecretValue(ctx context.Context, in *sm.GetSecretValueInput, optFns ...func(*sm.Options)) (*sm.GetSecretValueOutput, error)
	DescribeSecret(ctx context.Context, in *sm.DescribeSecretInput, optFns ...func(*sm.Options)) (*sm.DescribeSecretOutput, error)
	DeleteSecret(ctx context.Context, in *sm.DeleteSecretInput, optFns ...func(*sm.Options)) (*sm.DeleteSecretOutput, error)
	RestoreSecret(ctx context.Context, in *sm.RestoreSecretInput, optFns ...func(*sm.Options)) (*sm.RestoreSecretOutput, error)
	sm.ListSecretsAPIClient
}

// Store is the Secrets Manager provider.
type Store struct {
	api API
}

var _ secrets.Store = (*Store)(nil)

// New returns a store over a Secrets Manager client.
func New(api API) *Store { return &Store{api: api} }

const provider = secrets.SecretsManager

// Provider implements secrets.Store.
func (*Store) Provider() string { return provider }

// Capabilities implements secrets.Store.
func (*Store) Capabilities() secrets.Capabilities { return secrets.SecretsManagerCapabilities }

// split returns the SecretString or SecretBinary form of v.
func split(v secrets.Value) (*string, []byte) {
	if utf8.Valid(v) {
		return aws.String(string(v)), nil
	}
	return nil, []byte(v)
}

// Create implements secrets.Store with CreateSecret.
func (s *Store) Create(ctx context.Context, n secrets.Name, v secrets.Value) error {
	if err := secrets.CheckValue(provider, s.Capabilities(), n, v); err != nil {
		return err
	}
	str, bin := split(v)
	_, err := s.api.CreateSecret(ctx, &sm.CreateSecretInput{Name: aws.String(n.String()), SecretString: str, SecretBinary: bin})
	return mapError("create", n, err)
}

// Update implements secrets.Store with PutSecretValue, which fails for an
// absent secret or one scheduled for deletion.
func (s *Store) Update(ctx context.Context, n secrets.Name, v secrets.Value) error {
	if err := secrets.CheckValue(provider, s.Capabilities(), n, v); err != nil {
		return err
	}
	str, bin := split(v)
	_, err := s.api.PutSecretValue(ctx, &sm.PutSecretValueInput{SecretId: aws.String(n.String()), SecretString: str, SecretBinary: bin})
	return mapError("update", n, err)
}

// Read implements secrets.Store: SecretString or SecretBinary, whichever
// the current version holds.
func (s *Store) Read(ctx context.Context, n secrets.Name) (secrets.Value, error) {
	if n.IsZero() {
		return nil, fmt.Errorf("%w: no secret name", secrets.ErrInvalid)
	}
	out, err := s.api.GetSecretValue(ctx, &sm.GetSecretValueInput{SecretId: aws.String(n.String())})
	if err != nil {
		return nil, mapError("read", n, err)
	}
	if out.SecretString != nil {
		return secrets.Value(*out.SecretString), nil
	}
	if out.SecretBinary != nil {
		return secrets.Value(out.SecretBinary), nil
	}
	return nil, fmt.Errorf("%s: read %s: the current version has no value: update it", provider, n)
}

// List implements secrets.Store with ListSecrets and a case-sensitive name
// prefix filter, including secrets scheduled for deletion.
func (s *Store) List(ctx context.Context, cluster string, f secrets.Filter) ([]secrets.Entry, error) {
	if err := secrets.CheckFilter(cluster, f); err != nil {
		return nil, err
	}
	prefix := f.Prefix(cluster)
	pages := sm.NewListSecretsPaginator(s.api, &sm.ListSecretsInput{
		Filters:                []types.Filter{{Key: types.FilterNameStringTypeName, Values: []string{prefix}}},
		IncludePlannedDeletion: aws.Bool(true),
	})
	var out []secrets.Entry
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: list %s: %w", provider, prefix, err)
		}
		for _, e := range page.SecretList {
			name := aws.ToString(e.Name)
			if !strings.HasPrefix(name, prefix) {
				continue
			}
			n, ok := f.Visible(cluster, name)
			if !ok {
				continue
			}
			entry := n.Entry(provider)
			if e.LastChangedDate != nil {
				entry.LastModified = e.LastChangedDate.UTC()
			}
			if e.DeletedDate != nil {
				entry.DeletionScheduled = e.DeletedDate.UTC()
			}
			out = append(out, entry)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete implements secrets.Store: it schedules deletion after the
// recovery window.
func (s *Store) Delete(ctx context.Context, n secrets.Name) error {
	if n.IsZero() {
		return fmt.Errorf("%w: no secret name", secrets.ErrInvalid)
	}
	_, err := s.api.DeleteSecret(ctx, &sm.DeleteSecretInput{
		SecretId:             aws.String(n.String()),
		RecoveryWindowInDays: aws.Int64(int64(secrets.SecretsManagerCapabilities.RecoveryWindowDays)),
	})
	return mapError("delete", n, err)
}

// Restore implements secrets.Store with RestoreSecret; restoring a live
// secret changes nothing.
func (s *Store) Restore(ctx context.Context, n secrets.Name) error {
	if n.IsZero() {
		return fmt.Errorf("%w: no secret name", secrets.ErrInvalid)
	}
	_, err := s.api.RestoreSecret(ctx, &sm.RestoreSecretInput{SecretId: aws.String(n.String())})
	return mapError("restore", n, err)
}

// Destroy implements secrets.Store. A forced DeleteSecret succeeds for an
// absent secret (so that retries are safe), so DescribeSecret first
// reports absence as ErrNotFound.
func (s *Store) Destroy(ctx context.Context, n secrets.Name) error {
	if n.IsZero() {
		return fmt.Errorf("%w: no secret name", secrets.ErrInvalid)
	}
	if _, err := s.api.DescribeSecret(ctx, &sm.DescribeSecretInput{SecretId: aws.String(n.String())}); err != nil {
		return mapError("destroy", n, err)
	}
	_, err := s.api.DeleteSecret(ctx, &sm.DeleteSecretInput{
		SecretId:                   aws.String(n.String()),
		ForceDeleteWithoutRecovery: aws.Bool(true),
	})
	return mapError("destroy", n, err)
}

// mapError turns Secrets Manager errors into the secrets sentinels with
// advice.
func mapError(op string, n secrets.Name, err error) error {
	if err == nil {
		return nil
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("%s: %s %s: %w", provider, op, n, err)
	}
	switch code := apiErr.ErrorCode(); {
	case code == "ResourceExistsException":
		return fmt.Errorf("%s: %s %s: %w: use update to change its value: %w", provider, op, n, secrets.ErrExists, err)
	case code == "ResourceNotFoundException":
		hint := "check --for, --namespace and --provider"
		if op == "update" {
			hint = "use create to add it"
		}
		return fmt.Errorf("%s: %s %s: %w: %s: %w", provider, op, n, secrets.ErrNotFound, hint, err)
	case code == "InvalidRequestException" && strings.Contains(strings.ToLower(apiErr.ErrorMessage()), "deletion"):
		hint := "use restore to cancel the deletion, or destroy to delete it now"
		if op == "delete" {
			hint = "it is already scheduled: use restore to cancel, or destroy to delete it now"
		}
		return fmt.Errorf("%s: %s %s: %w: %s: %w", provider, op, n, secrets.ErrScheduledForDeletion, hint, err)
	case code == "DecryptionFailure" || code == "EncryptionFailure":
		return fmt.Errorf("%s: %s %s: %w: grant these credentials kms:Decrypt/kms:GenerateDataKey on the secret's KMS key (or use the AWS managed key aws/secretsmanager): %w",
			provider, op, n, secrets.ErrKMS, err)
	case code == "AccessDeniedException":
		return fmt.Errorf("%s: %s %s: access denied: grant these credentials the secretsmanager permission for %s on %s: %w", provider, op, n, op, n, err)
	}
	return fmt.Errorf("%s: %s %s: %w", provider, op, n, err)
}
