// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package s3store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
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
	// HTTPClient replaces the SDK's HTTP client for S3 requests; the
	// timeouts below then do not apply.
	HTTPClient aws.HTTPClient

	// ConnectTimeout bounds establishing a TCP connection
	// (DefaultConnectTimeout when zero).
	ConnectTimeout time.Duration
	// TLSHandshakeTimeout bounds the TLS handshake
	// (DefaultTLSHandshakeTimeout when zero).
	TLSHandshakeTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for a response's headers after
	// the request, body included, was sent (DefaultResponseHeaderTimeout
	// when zero).
	ResponseHeaderTimeout time.Duration

	// MultipartThreshold and PartSize tune Write: objects larger than the
	// threshold are uploaded in parts of PartSize bytes. Zero means
	// MultipartThreshold and 16 MiB; S3 needs parts of at least 5 MiB.
	MultipartThreshold int64
	PartSize           int64
}

// Default timeouts of S3 requests. A request that gets no answer fails
// after ResponseHeaderTimeout per attempt, naming the endpoint.
const (
	DefaultConnectTimeout        = 10 * time.Second
	DefaultTLSHandshakeTimeout   = 10 * time.Second
	DefaultResponseHeaderTimeout = 30 * time.Second
)

// Bucket is an objstore.Bucket backed by one S3 bucket. It is safe for
// concurrent use.
type Bucket struct {
	client   *s3.Client
	bucket   string
	region   string
	endpoint string
	https    bool
	// multipartThreshold and partSize configure Write.
	multipartThreshold int64
	partSize           int64
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
	if opts.HTTPClient == nil {
		load = append(load, config.WithHTTPClient(timeoutClient(opts)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("s3store: load AWS configuration (profile %q): %w", opts.Profile, err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("s3store: no AWS region for bucket %q: set AWS_REGION or pass a region", opts.Bucket)
	}
	endpoint := "https://s3." + cfg.Region + ".amazonaws.com"
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		// By now o.BaseEndpoint holds whatever the SDK resolved from
		// AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or the shared config.
		ep := chooseEndpoint(opts.Endpoint, aws.ToString(o.BaseEndpoint))
		if ep.BaseEndpoint != "" {
			o.BaseEndpoint = aws.String(ep.BaseEndpoint)
			endpoint = ep.BaseEndpoint
		}
		o.UsePathStyle = ep.PathStyle
		// Ranged and multipart reads carry no whole-object checksum; that
		// is expected and not worth a log line per request.
		o.DisableLogOutputChecksumValidationSkipped = true
		o.EndpointOptions.UseDualStackEndpoint = ep.DualStack
		if opts.HTTPClient != nil {
			// Set on the client, not the shared config: the config
			// loader refuses a plain *http.Client when AWS_CA_BUNDLE is set.
			o.HTTPClient = opts.HTTPClient
		}
	})
	b := &Bucket{
		client:             client,
		bucket:             opts.Bucket,
		region:             cfg.Region,
		endpoint:           endpoint,
		https:              !strings.HasPrefix(strings.ToLower(endpoint), "http:"),
		condRetryer:        conditionalRetryer(),
		multipartThreshold: MultipartThreshold,
		partSize:           partSize,
	}
	if opts.MultipartThreshold > 0 {
		b.multipartThreshold = opts.MultipartThreshold
	}
	if opts.PartSize > 0 {
		b.partSize = opts.PartSize
	}
	return b, nil
}

// timeoutClient is the SDK's HTTP client with Podmin's connect, TLS and
// response-header timeouts, so that an endpoint that never answers fails a
// request instead of hanging it.
func timeoutClient(opts Options) *awshttp.BuildableClient {
	connect := cmp.Or(opts.ConnectTimeout, DefaultConnectTimeout)
	handshake := cmp.Or(opts.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout)
	header := cmp.Or(opts.ResponseHeaderTimeout, DefaultResponseHeaderTimeout)
	return awshttp.NewBuildableClient().
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = connect }).
		WithTransportOptions(func(tr *http.Transport) {
			tr.TLSHandshakeTimeout = handshake
			tr.ResponseHeaderTimeout = header
		})
}

// Endpoint returns the base URL requests go to.
func (b *Bucket) Endpoint() string { return b.endpoint }

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
