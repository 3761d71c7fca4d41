// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"context"

	"podmin.dev/podmin/internal/objstore"
)

// BucketRef names a cluster bucket as an operator gave it.
type BucketRef struct {
	Bucket  string
	Region  string
	Profile string
}

// Provider is one cloud (or the embedded local one).
type Provider interface {
	// Name is the value of --provider.
	Name() string
	// ValidateBucketName rejects names the provider cannot store.
	ValidateBucketName(name string) error
	// ResolveRegion returns region when set, otherwise the provider's
	// default for the profile (the SDK chain for AWS), or an error saying
	// how to choose one.
	ResolveRegion(ctx context.Context, region, profile string) (string, error)
	// OpenBucket returns the bucket's object store and administration.
	// It does not create the bucket or check that it exists.
	OpenBucket(ctx context.Context, ref BucketRef) (objstore.Bucket, error)
	// SecretsProviders lists the secrets providers usable with this
	// provider, default first.
	SecretsProviders() []string
}
