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
	switch provider {
	case secrets.ParameterStore:
		c, err := NewSSM(ctx, opts)
		if err != nil {
			return nil, err
		}
		return parameterstore.New(c), nil
	case secrets.SecretsManager:
		c, err := NewSecretsManager(ctx, opts)
		if err != nil {
			return nil, err
		}
		return secretsmanager.New(c), nil
	}
	return nil, fmt.Errorf("unknown AWS secrets provider %q: use %s or %s", provider, secrets.ParameterStore, secrets.SecretsManager)
}

// NewSSM returns the Parameter Store client OpenSecrets uses: on AWS's
// dual-stack endpoint unless a custom endpoint is configured.
func NewSSM(ctx context.Context, opts SecretsOptions) (*ssm.Client, error) {
	cfg, err := loadConfig(ctx, secrets.ParameterStore, opts)
	if err != nil {
		return nil, err
	}
	return ssm.NewFromConfig(cfg, func(o *ssm.Options) {
		o.EndpointOptions.UseDualStackEndpoint = DualStack(o.BaseEndpoint)
		if opts.HTTPClient != nil {
			o.HTTPClient = opts.HTTPClient
		}
	}), nil
}

// NewSecretsManager returns the Secrets Manager client OpenSecrets uses:
// on AWS's dual-stack endpoint unless a custom endpoint is configured.
func NewSecretsManager(ctx context.Context, opts SecretsOptions) (*sm.Client, error) {
	cfg, err := loadConfig(ctx, secrets.SecretsManager, opts)
	if err != nil {
		return nil, err
	}
	return sm.NewFromConfig(cfg, func(o *sm.Options) {
		o.EndpointOptions.UseDualStackEndpoint = DualStack(o.BaseEndpoint)
		if opts.HTTPClient != nil {
			o.HTTPClient = opts.HTTPClient
		}
	}), nil
}

// DualStack is the endpoint choice of every AWS client Podmin makes: AWS's
// dual-stack (IPv4 and IPv6) endpoints, which IPv6-only nodes without
// NAT64 can reach, unless base (the endpoint the SDK resolved from
// AWS_ENDPOINT_URL_<SERVICE>, AWS_ENDPOINT_URL or the shared config) names
// another service, which the SDK refuses to combine with dual-stack.
func DualStack(base *string) awssdk.DualStackEndpointState {
	if awssdk.ToString(base) != "" {
		return awssdk.DualStackEndpointStateDisabled
	}
	return awssdk.DualStackEndpointStateEnabled
}

// loadConfig loads the SDK's standard configuration for provider.
func loadConfig(ctx context.Context, provider string, opts SecretsOptions) (awssdk.Config, error) {
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
		return cfg, fmt.Errorf("%s: load AWS configuration (profile %q): %w", provider, opts.Profile, err)
	}
	if cfg.Region == "" {
		return cfg, fmt.Errorf("%s: no AWS region: set AWS_REGION or a region in the AWS profile", provider)
	}
	return cfg, nil
}
