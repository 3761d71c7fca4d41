// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package aws

import (
	"context"
	"fmt"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	sm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/secrets/parameterstore"
	"podmin.dev/podmin/internal/secrets/secretsmanager"
)

// SecretsOptions configure OpenSecrets. Everything is optional and falls
// back to the SDK's standard configuration chain, which also resolves
// AWS_ENDPOINT_URL_SSM, AWS_ENDPOINT_URL_SECRETS_MANAGER and
// AWS_ENDPOINT_URL.
type SecretsOptions struct {
	// Region overrides the SDK's region chain.
	Region string
	// Profile selects a shared config profile instead of AWS_PROFILE.
	Profile string
	// Credentials replaces the SDK's credential chain; tests use static keys.
	Credentials awssdk.CredentialsProvider
	// HTTPClient replaces the SDK's HTTP client.
	HTTPClient awssdk.HTTPClient
}

// OpenSecrets returns the AWS secrets provider named provider
// (secrets.ParameterStore or secrets.SecretsManager). It does not contact
// AWS.
func OpenSecrets(ctx context.Context, provider string, opts SecretsOptions) (secrets.Store, error) {
	if provider != secrets.ParameterStore && provider != secrets.SecretsManager {
		return nil, fmt.Errorf("unknown AWS secrets provider %q: use %s or %s", provider, secrets.ParameterStore, secrets.SecretsManager)
	}
	var load []func(*config.LoadOptions) error
	if opts.Region != "" {
		load = append(load, config.WithRegion(opts.Region))
	}
	if opts.Profile != "" {
		load = append(load, config.WithSharedConfigProfile(opts.Profile))
	}
	if opts.Credentials != nil {
		load = append(load, config.WithCredentialsProvider(opts.Credentials))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("%s: load AWS configuration (profile %q): %w", provider, opts.Profile, err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("%s: no AWS region: set AWS_REGION or a region in the AWS profile", provider)
	}
	if provider == secrets.ParameterStore {
		return parameterstore.New(ssm.NewFromConfig(cfg, func(o *ssm.Options) {
			if opts.HTTPClient != nil {
				o.HTTPClient = opts.HTTPClient
			}
		})), nil
	}
	return secretsmanager.New(sm.NewFromConfig(cfg, func(o *sm.Options) {
		if opts.HTTPClient != nil {
			o.HTTPClient = opts.HTTPClient
		}
	})), nil
}
