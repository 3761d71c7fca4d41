// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package aws

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/config"

	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/s3store"
)

// Provider is the AWS provider.
type Provider struct{}

var _ cloud.Provider = Provider{}

// Name implements cloud.Provider.
func (Provider) Name() string { return "aws" }

// ValidateBucketName implements cloud.Provider.
func (Provider) ValidateBucketName(name string) error { return cloud.ValidateS3BucketName(name) }

// ResolveRegion implements cloud.Provider with the SDK's region chain.
func (Provider) ResolveRegion(ctx context.Context, region, profile string) (string, error) {
	if region != "" {
		return region, nil
	}
	var opts []func(*config.LoadOptions) error
	if profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(profile))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return "", fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return "", errors.New("no AWS region: pass --region, set AWS_REGION, or set region in the AWS profile")
	}
	return cfg.Region, nil
}

// OpenBucket implements cloud.Provider.
func (Provider) OpenBucket(ctx context.Context, ref cloud.BucketRef) (objstore.Bucket, error) {
	return s3store.New(ctx, s3store.Options{Bucket: ref.Bucket, Region: ref.Region, Profile: ref.Profile})
}

// SecretsProviders implements cloud.Provider.
func (Provider) SecretsProviders() []string {
	return []string{"aws-parameter-store", "aws-secrets-manager"}
}
