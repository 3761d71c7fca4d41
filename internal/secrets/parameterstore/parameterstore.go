// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package parameterstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"

	"podmin.dev/podmin/internal/secrets"
)

// API is the part of the SSM client the store uses; *ssm.Client has it.
type API interface {
	PutParameter(ctx context.Context, in *ssm.PutParameterInput, optFns ...func(*ssm.Options)) (*ssm.PutParameterOutput, error)
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
	DeleteParameter(ctx context.Context, in *ssm.DeleteParameterInput, optFns ...func(*ssm.Options)) (*ssm.DeleteParameterOutput, error)
	ListTagsForResource(ctx context.Context, in *ssm.ListTagsForResourceInput, optFns ...func(*ssm.Options)) (*ssm.ListTagsForResourceOutput, error)
	ssm.GetParametersByPathAPIClient
}

// Store is the Parameter Store provider.
type Store struct {
	api API
}

var _ secrets.NonceStore = (*Store)(nil)

// New returns a store over an SSM client.
func New(api API) *Store { return &Store{api: api} }

const provider = secrets.ParameterStore

// Provider implements secrets.Store.
func (*Store) Provider() string { return provider }

// Capabilities implements secrets.Store.
func (*Store) Capabilities() secrets.Capabilities { return secrets.ParameterStoreCapabilities }

// Create implements secrets.Store with a SecureString PutParameter that
// does not overwrite.
func (s *Store) Create(ctx context.Context, n secrets.Name, v secrets.Value) error {
	if err := secrets.CheckValue(provider, s.Capabilities(), n, v); err != nil {
		return err
	}
	return s.put(ctx, n, v, false, nil)
}

// CreateWithNonce implements secrets.NonceStore: the nonce is the
// parameter's secrets.CreateNonceTag tag, set by the same PutParameter
// (the credentials need ssm:AddTagsToResource).
func (s *Store) CreateWithNonce(ctx context.Context, n secrets.Name, v secrets.Value, nonce string) error {
	if err := secrets.CheckValue(provider, s.Capabilities(), n, v); err != nil {
		return err
	}
	if err := secrets.CheckNonce(nonce); err != nil {
		return err
	}
	return s.put(ctx, n, v, false, []types.Tag{{Key: aws.String(secrets.CreateNonceTag), Value: aws.String(nonce)}})
}

// CreateNonce implements secrets.NonceStore with ListTagsForResource (the
// credentials need ssm:ListTagsForResource).
func (s *Store) CreateNonce(ctx context.Context, n secrets.Name) (string, error) {
	if n.IsZero() {
		return "", fmt.Errorf("%w: no secret name", secrets.ErrInvalid)
	}
	out, err := s.api.ListTagsForResource(ctx, &ssm.ListTagsForResourceInput{
		ResourceType: types.ResourceTypeForTaggingParameter,
		ResourceId:   aws.String(n.String()),
	})
	if err != nil {
		return "", mapError(tagsOp, n, err)
	}
	for _, t := range out.TagList {
		if aws.ToString(t.Key) == secrets.CreateNonceTag {
			return aws.ToString(t.Value), nil
		}
	}
	return "", nil
}

// Update implements secrets.Store. Parameter Store has no conditional
// overwrite, so the parameter's existence is checked first; a concurrent
// destroy between the two calls re-creates it.
func (s *Store) Update(ctx context.Context, n secrets.Name, v secrets.Value) error {
	if err := secrets.CheckValue(provider, s.Capabilities(), n, v); err != nil {
		return err
	}
	// Without decryption: existence needs no kms:Decrypt grant.
	_, err := s.api.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(n.String()), WithDecryption: aws.Bool(false)})
	if err != nil {
		return mapError("update", n, err)
	}
	return s.put(ctx, n, v, true, nil)
}

func (s *Store) put(ctx context.Context, n secrets.Name, v secrets.Value, overwrite bool, tags []types.Tag) error {
	op := "create"
	if overwrite {
		op = "update"
	}
	_, err := s.api.PutParameter(ctx, &ssm.PutParameterInput{
		Name:      aws.String(n.String()),
		Value:     aws.String(string(v)),
		Type:      types.ParameterTypeSecureString,
		Overwrite: aws.Bool(overwrite),
		Tags:      tags,
	})
	return mapError(op, n, err)
}

// Read implements secrets.Store. String and StringList values are returned
// as stored; SecureString values are decrypted.
func (s *Store) Read(ctx context.Context, n secrets.Name) (secrets.Value, error) {
	if n.IsZero() {
		return nil, fmt.Errorf("%w: no secret name", secrets.ErrInvalid)
	}
	out, err := s.api.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(n.String()), WithDecryption: aws.Bool(true)})
	if err != nil {
		return nil, mapError("read", n, err)
	}
	if out.Parameter == nil || out.Parameter.Value == nil {
		return nil, fmt.Errorf("%s: read %s: the response has no value: retry, or check the parameter in the AWS console", provider, n)
	}
	return secrets.Value(*out.Parameter.Value), nil
}

// List implements secrets.Store with a recursive GetParametersByPath,
// without decryption (values are dropped on arrival).
func (s *Store) List(ctx context.Context, cluster string, f secrets.Filter) ([]secrets.Entry, error) {
	if err := secrets.CheckFilter(cluster, f); err != nil {
		return nil, err
	}
	path := strings.TrimSuffix(f.Prefix(cluster), "/")
	pages := ssm.NewGetParametersByPathPaginator(s.api, &ssm.GetParametersByPathInput{
		Path:           aws.String(path),
		Recursive:      aws.Bool(true),
		WithDecryption: aws.Bool(false),
	})
	var out []secrets.Entry
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: list %s: %w", provider, path, err)
		}
		for _, p := range page.Parameters {
			n, ok := f.Visible(cluster, aws.ToString(p.Name))
			if !ok {
				continue
			}
			e := n.Entry(provider)
			if p.LastModifiedDate != nil {
				e.LastModified = p.LastModifiedDate.UTC()
			}
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete implements secrets.Store: Parameter Store has no recovery window.
func (s *Store) Delete(_ context.Context, n secrets.Name) error {
	if n.IsZero() {
		return fmt.Errorf("%w: no secret name", secrets.ErrInvalid)
	}
	return secrets.Unsupported(provider)
}

// Restore implements secrets.Store: Parameter Store has no recovery window.
func (s *Store) Restore(ctx context.Context, n secrets.Name) error { return s.Delete(ctx, n) }

// Destroy implements secrets.Store with DeleteParameter.
func (s *Store) Destroy(ctx context.Context, n secrets.Name) error {
	if n.IsZero() {
		return fmt.Errorf("%w: no secret name", secrets.ErrInvalid)
	}
	_, err := s.api.DeleteParameter(ctx, &ssm.DeleteParameterInput{Name: aws.String(n.String())})
	return mapError("destroy", n, err)
}

// kmsCodes are the SSM error codes that mean the KMS key could not be used.
var kmsCodes = map[string]bool{
	"InvalidKeyId": true, "KMSAccessDeniedException": true, "KMSDisabledException": true,
	"KMSInvalidStateException": true, "KMSNotFoundException": true, "KMSOptInRequired": true,
}

// opPermission names the IAM action an operation needs.
func opPermission(op string) string {
	switch op {
	case "create", "update":
		return "ssm:PutParameter (ssm:AddTagsToResource too for a create with a nonce)"
	case "read":
		return "ssm:GetParameter"
	case "destroy":
		return "ssm:DeleteParameter"
	case tagsOp:
		return "ssm:ListTagsForResource"
	}
	return "the SSM permission for " + op
}

// tagsOp is the operation name of a tag read in errors.
const tagsOp = "read the tags of"

// mapError turns SSM errors into the secrets sentinels with advice.
func mapError(op string, n secrets.Name, err error) error {
	if err == nil {
		return nil
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("%s: %s %s: %w", provider, op, n, err)
	}
	code := apiErr.ErrorCode()
	switch {
	case code == "ParameterAlreadyExists":
		return fmt.Errorf("%s: %s %s: %w: use update to change its value: %w", provider, op, n, secrets.ErrExists, err)
	case code == "ParameterNotFound" || code == "InvalidResourceId":
		hint := "check --for, --namespace and --provider"
		if op == "update" {
			hint = "use create to add it"
		}
		return fmt.Errorf("%s: %s %s: %w: %s: %w", provider, op, n, secrets.ErrNotFound, hint, err)
	case kmsCodes[code] || (code == "AccessDeniedException" && strings.Contains(apiErr.ErrorMessage(), "kms:")):
		return fmt.Errorf("%s: %s %s: %w: grant these credentials kms:Encrypt/kms:Decrypt on the parameter's KMS key (or use the AWS managed key aws/ssm): %w",
			provider, op, n, secrets.ErrKMS, err)
	case code == "AccessDeniedException":
		return fmt.Errorf("%s: %s %s: access denied: grant these credentials %s on /%s/*: %w", provider, op, n, opPermission(op), n.Cluster(), err)
	}
	return fmt.Errorf("%s: %s %s: %w", provider, op, n, err)
}
