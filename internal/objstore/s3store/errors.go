// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package s3store

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"podmin.dev/podmin/internal/objstore"
)

// errorCode returns the S3 error code and HTTP status of err, either of
// which may be empty/zero. HEAD responses carry no body, so for them the
// status is all there is.
func errorCode(err error) (code string, status int) {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
	}
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) {
		status = respErr.HTTPStatusCode()
	}
	return code, status
}

// mapError translates an S3 error from operation op on key (empty for
// requests on the bucket itself) into the objstore sentinels, naming the
// bucket and key. Errors without a sentinel meaning are
// wrapped unchanged.
func (b *Bucket) mapError(op, key string, err error) error {
	if err == nil {
		return nil
	}
	where := fmt.Sprintf("s3 %s s3://%s/%s", op, b.bucket, key)
	code, status := errorCode(err)
	switch {
	case code == "NoSuchBucket" || (key == "" && status == 404):
		// Bucket-level requests (key "") have no object to miss, and
		// HeadBucket's 404 carries no code.
		return b.bucketNotFound(where, err)
	case status == 304 || code == "NotModified":
		return fmt.Errorf("%s: %w", where, objstore.ErrNotModified)
	case status == 412 || code == "PreconditionFailed" || code == "ConditionalRequestConflict":
		// AWS answers 409 ConditionalRequestConflict when a concurrent
		// conditional write to the same key won; for the loser that is the
		// same outcome as a 412.
		return fmt.Errorf("%s: %w: %w", where, objstore.ErrPrecondition, err)
	case status == 404 || code == "NoSuchKey" || code == "NotFound":
		return fmt.Errorf("%s: %w", where, objstore.ErrNotFound)
	case status == 403 || code == "AccessDenied":
		return fmt.Errorf("%s: access denied: check the credentials' IAM policy for bucket %q: %w", where, b.bucket, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// bucketNotFound is the error for a request at where that found no bucket.
// It wraps ErrBucketNotFound and never ErrNotFound.
func (b *Bucket) bucketNotFound(where string, err error) error {
	return fmt.Errorf("%s: bucket %q does not exist in region %s: check the bucket name and region, or create it: %w: %w",
		where, b.bucket, b.region, objstore.ErrBucketNotFound, err)
}

// conditionalRetryer is the retry policy for conditional writes and
// deletes. The SDK's default policy retries after a lost response (a reset
// or timed-out connection); if the first attempt had been applied, the retry
// then fails its own condition and a successful write would be reported as
// ErrPrecondition, which callers treat as "someone else won". So this
// policy retries only when S3 certainly did not act: the connection was
// never established, or S3 answered with throttling. Anything else surfaces
// as an error that wraps no sentinel, and the caller resolves it by reading
// the object.
func conditionalRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.Retryables = []retry.IsErrorRetryable{
			retry.NoRetryCanceledError{},
			retry.IsErrorRetryableFunc(notSent),
			retry.RetryableErrorCode{Codes: retry.DefaultThrottleErrorCodes},
		}
	})
}

// notSent reports whether err shows that the request never left this host.
func notSent(err error) aws.Ternary {
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return aws.TrueTernary
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && !dnsErr.IsNotFound {
		return aws.TrueTernary
	}
	// net/http's handshake timeout has no exported type. The handshake
	// happens on a new connection before any byte of the request.
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() && strings.Contains(netErr.Error(), "TLS handshake timeout") {
		return aws.TrueTernary
	}
	return aws.UnknownTernary
}

// conditionalError maps the error of a conditional request. A transport
// failure after the request may have been sent is reported as such: its
// effect on the object is unknown.
func (b *Bucket) conditionalError(op, key string, err error) error {
	var sendErr *smithyhttp.RequestSendError
	if !errors.As(err, &sendErr) {
		return b.mapError(op, key, err)
	}
	if errors.Is(err, objstore.ErrSizeMismatch) {
		// The body failed before it was complete: S3 stores no object
		// from a request whose body fell short of its Content-Length.
		return fmt.Errorf("s3 %s s3://%s/%s: nothing was written: %w: %w", op, b.bucket, key, objstore.ErrNotApplied, err)
	}
	if notSent(err) == aws.TrueTernary {
		// Only unsent attempts and throttling are retried, so no attempt
		// was applied.
		return fmt.Errorf("s3 %s s3://%s/%s: cannot reach S3: %w: %w", op, b.bucket, key, objstore.ErrNotApplied, err)
	}
	return fmt.Errorf("s3 %s s3://%s/%s: no answer from S3, the request may or may not have been applied: read the object to find out: %w",
		op, b.bucket, key, err)
}
