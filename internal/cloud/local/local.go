// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package local

import (
	"context"
	"fmt"
	"path/filepath"

	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/scrub"
)

// Region is the only region of the local provider.
const Region = "local"

// Provider is the local provider.
type Provider struct {
	// BucketsDir holds buckets given by name (absolute --bucket paths are
	// used as they are).
	BucketsDir string
}

var _ cloud.Provider = Provider{}

// New returns the local provider keeping named buckets under
// <dataDir>/buckets.
func New(dataDir string) Provider {
	return Provider{BucketsDir: filepath.Join(dataDir, "buckets")}
}

// Name implements cloud.Provider.
func (Provider) Name() string { return "local" }

// ValidateBucketName accepts an absolute directory path or an S3-style name.
func (Provider) ValidateBucketName(name string) error {
	if filepath.IsAbs(name) {
		if filepath.Clean(name) == "/" {
			return fmt.Errorf("invalid bucket %s: the root directory cannot be a bucket: name a directory of its own", scrub.Quote(name))
		}
		return nil
	}
	if err := cloud.ValidateS3BucketName(name); err != nil {
		return fmt.Errorf("%w (or pass an absolute directory path)", err)
	}
	return nil
}

// ResolveRegion implements cloud.Provider: the only region is "local".
func (Provider) ResolveRegion(_ context.Context, region, _ string) (string, error) {
	if region != "" && region != Region {
		return "", fmt.Errorf("the local provider has one region, %q, not %s: omit --region", Region, scrub.Quote(region))
	}
	return Region, nil
}

// Dir returns the directory of a bucket.
func (p Provider) Dir(bucket string) string {
	if filepath.IsAbs(bucket) {
		return filepath.Clean(bucket)
	}
	return filepath.Join(p.BucketsDir, bucket)
}

// OpenBucket implements cloud.Provider.
func (p Provider) OpenBucket(_ context.Context, ref cloud.BucketRef) (objstore.Bucket, error) {
	if err := p.ValidateBucketName(ref.Bucket); err != nil {
		return nil, err
	}
	return localstore.Open(p.Dir(ref.Bucket)), nil
}

// SecretsProviders implements cloud.Provider. A local cluster keeps secrets
// in the local store by default but may read the AWS stores.
func (Provider) SecretsProviders() []string {
	return []string{"local", "aws-parameter-store", "aws-secrets-manager"}
}
