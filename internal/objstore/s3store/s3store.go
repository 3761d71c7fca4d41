// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package s3store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"podmin.dev/podmin/internal/objstore"
)

// Options configure New. Everything except Bucket is optional and falls back
// to the SDK's standard configuration chain (environment, shared config
// files, instance roles).
type Options struct {
	// Bucket is the bucket that holds all of the cluster's state.
	Bucket string
	// Region overrides the SDK's region chain (AWS_REGION, the profile).
	Region string
	// Profile selects a shared config profile instead of AWS_PROFILE.
	Profile string
	// Endpoint overrides AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL for an
	// S3-compatible service. Any endpoint in effect switches to path-style
	// addressing and turns dual-stack off.
	Endpoint string
	// Credentials replaces the SDK's credential chain; tests use static keys.
	Credentials aws.CredentialsProvider
	// HTTPClient replaces the SDK's HTTP client for S3 requests.
	HTTPClient aws.HTTPClient
}

// Bucket is an objstore.Bucket backed by one S3 bucket. It is safe for
// concurrent use.
type Bucket struct {
	client *s3.Client
	bucket string
	region string
	// condRetryer is used for conditional writes and deletes; see
	// conditionalRetryer.
	condRetryer aws.Retryer
}

var _ objstore.Bucket = (*Bucket)(nil)

// New configures a client for opts.Bucket. It does not contact S3; use
// BucketExists to check that the bucket is reachable.
func New(ctx context.Context, opts Options) (*Bucket, error) {
	if opts.Bucket == "" {
		return nil, errors.New("s3store: no bucket name given: set the cluster's bucket")
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
		return nil, fmt.Errorf("s3store: load AWS configuration (profile %q): %w", opts.Profile, err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("s3store: no AWS region for bucket %q: set AWS_REGION or pass a region", opts.Bucket)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		// By now o.BaseEndpoint holds whatever the SDK resolved from
		// AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or the shared config.
		ep := chooseEndpoint(opts.Endpoint, aws.ToString(o.BaseEndpoint))
		if ep.BaseEndpoint != "" {
			o.BaseEndpoint = aws.String(ep.BaseEndpoint)
		}
		o.UsePathStyle = ep.PathStyle
		o.EndpointOptions.UseDualStackEndpoint = ep.DualStack
		if opts.HTTPClient != nil {
			// Set on the client, not the shared config: the config
			// loader refuses a plain *http.Client when AWS_CA_BUNDLE is set.
			o.HTTPClient = opts.HTTPClient
		}
	})
	return &Bucket{
		client:      client,
		bucket:      opts.Bucket,
		region:      cfg.Region,
		condRetryer: conditionalRetryer(),
	}, nil
}

// Name returns the bucket's name.
func (b *Bucket) Name() string { return b.bucket }

// endpointChoice is how the client addresses S3.
type endpointChoice struct {
	// BaseEndpoint is the custom endpoint URL, empty for AWS's own.
	BaseEndpoint string
	// PathStyle puts the bucket in the path instead of the host name.
	PathStyle bool
	// DualStack selects AWS's IPv4+IPv6 endpoints.
	DualStack aws.DualStackEndpointState
}

// chooseEndpoint decides the addressing from an explicit endpoint option and
// the one the SDK resolved from the environment or shared config (explicit
// wins). S3-compatible services rarely resolve virtual-hosted bucket names,
// and the SDK refuses dual-stack together with a custom endpoint; on AWS
// itself dual-stack keeps IPv6-only nodes working.
func chooseEndpoint(explicit, resolved string) endpointChoice {
	ep := explicit
	if ep == "" {
		ep = resolved
	}
	if ep != "" {
		return endpointChoice{BaseEndpoint: ep, PathStyle: true, DualStack: aws.DualStackEndpointStateDisabled}
	}
	return endpointChoice{DualStack: aws.DualStackEndpointStateEnabled}
}

// Client returns the S3 client addressing the bucket, for callers that
// stream ranged reads (the node registry) which the object contract leaves
// out.
func (b *Bucket) Client() *s3.Client { return b.client }
