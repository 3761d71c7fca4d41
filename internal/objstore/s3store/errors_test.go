// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package s3store

import (
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"podmin.dev/podmin/internal/objstore"
)

// sdkError builds an error shaped like the ones the S3 client returns for an
// HTTP error response; code is empty for bodiless (HEAD) responses.
func sdkError(op string, status int, code string) error {
	var inner error = &smithy.GenericAPIError{Code: code, Message: "details"}
	if code == "" {
		inner = errors.New("bodiless response")
	}
	return &smithy.OperationError{ServiceID: "S3", OperationName: op, Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: http.Header{}}},
			Err:      inner,
		},
		RequestID: "REQ1",
	}}
}

func TestMapError(t *testing.T) {
	b := &Bucket{bucket: "state", region: "eu-west-1"}
	sendErr := &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject",
		Err: &smithyhttp.RequestSendError{Err: io.ErrUnexpectedEOF}}
	dialErr := &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject",
		Err: &smithyhttp.RequestSendError{Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}}
	for _, tc := range []struct {
		name        string
		conditional bool
		op, key     string
		err         error
		sentinel    error // nil: must match none
		want        string
	}{{
		name: "412", op: "put-if-match", key: "k", err: sdkError("PutObject", 412, "PreconditionFailed"),
		sentinel: objstore.ErrPrecondition, want: "s3 put-if-match s3://state/k: precondition failed: %s",
	}, {
		name: "409 ConditionalRequestConflict", op: "put-if-absent", key: "k", err: sdkError("PutObject", 409, "ConditionalRequestConflict"),
		sentinel: objstore.ErrPrecondition, want: "s3 put-if-absent s3://state/k: precondition failed: %s",
	}, {
		name: "409 other conflict", op: "delete", key: "k", err: sdkError("DeleteObject", 409, "OperationAborted"),
		want: "s3 delete s3://state/k: %s",
	}, {
		name: "304", op: "get", key: "k", err: sdkError("GetObject", 304, ""),
		sentinel: objstore.ErrNotModified, want: "s3 get s3://state/k: not modified",
	}, {
		name: "NoSuchKey", op: "get", key: "k", err: sdkError("GetObject", 404, "NoSuchKey"),
		sentinel: objstore.ErrNotFound, want: "s3 get s3://state/k: object not found",
	}, {
		name: "HEAD 404", op: "head", key: "k", err: sdkError("HeadObject", 404, ""),
		sentinel: objstore.ErrNotFound, want: "s3 head s3://state/k: object not found",
	}, {
		name: "NotFound code", op: "head", key: "k", err: sdkError("HeadObject", 404, "NotFound"),
		sentinel: objstore.ErrNotFound, want: "s3 head s3://state/k: object not found",
	}, {
		name: "NoSuchBucket", op: "put", key: "k", err: sdkError("PutObject", 404, "NoSuchBucket"),
		sentinel: objstore.ErrBucketNotFound,
		want:     `s3 put s3://state/k: bucket "state" does not exist in region eu-west-1: check the bucket name and region, or create it: bucket not found: %s`,
	}, {
		name: "bucket-level 404", op: "head-bucket", key: "", err: sdkError("HeadBucket", 404, ""),
		sentinel: objstore.ErrBucketNotFound,
		want:     `s3 head-bucket s3://state/: bucket "state" does not exist in region eu-west-1: check the bucket name and region, or create it: bucket not found: %s`,
	}, {
		name: "403", op: "get", key: "k", err: sdkError("GetObject", 403, "AccessDenied"),
		want: `s3 get s3://state/k: access denied: check the credentials' IAM policy for bucket "state": %s`,
	}, {
		name: "500", op: "put", key: "k", err: sdkError("PutObject", 500, "InternalError"),
		want: "s3 put s3://state/k: %s",
	}, {
		name: "conditional 412", conditional: true, op: "put-if-absent", key: "k", err: sdkError("PutObject", 412, "PreconditionFailed"),
		sentinel: objstore.ErrPrecondition, want: "s3 put-if-absent s3://state/k: precondition failed: %s",
	}, {
		name: "conditional lost response", conditional: true, op: "put-if-absent", key: "k", err: sendErr,
		want: "s3 put-if-absent s3://state/k: no answer from S3, the request may or may not have been applied: read the object to find out: %s",
	}, {
		name: "conditional unreachable", conditional: true, op: "put-if-match", key: "k", err: dialErr,
		sentinel: objstore.ErrNotApplied,
		want:     "s3 put-if-match s3://state/k: cannot reach S3: the request was not applied: %s",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var got error
			if tc.conditional {
				got = b.conditionalError(tc.op, tc.key, tc.err)
			} else {
				got = b.mapError(tc.op, tc.key, tc.err)
			}
			want := tc.want
			if want[len(want)-2:] == "%s" {
				want = want[:len(want)-2] + tc.err.Error()
			}
			if got.Error() != want {
				t.Errorf("error text\n got %s\nwant %s", got, want)
			}
			for _, s := range []error{objstore.ErrNotFound, objstore.ErrBucketNotFound, objstore.ErrPrecondition, objstore.ErrNotModified, objstore.ErrBucketExists, objstore.ErrNotApplied} {
				if errors.Is(got, s) != (s == tc.sentinel) {
					t.Errorf("errors.Is(%v, %v) = %v", got, s, !(s == tc.sentinel))
				}
			}
		})
	}
	if err := b.mapError("get", "k", nil); err != nil {
		t.Errorf("mapError(nil) = %v", err)
	}
}

func TestLocationRegion(t *testing.T) {
	for in, want := range map[string]string{"": "us-east-1", "EU": "eu-west-1", "eu-central-1": "eu-central-1"} {
		if got := locationRegion(in); got != want {
			t.Errorf("locationRegion(%q) = %q, want %q", in, got, want)
		}
	}
}
