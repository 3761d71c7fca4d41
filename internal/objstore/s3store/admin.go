// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package s3store

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"podmin.dev/podmin/internal/objstore"
)

// BucketExists implements objstore.BucketAdmin with HeadBucket. A bucket
// that exists but is not ours to read (403) is an error, not false: the
// name cannot be used either way.
func (b *Bucket) BucketExists(ctx context.Context) (bool, error) {
	_, err := b.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b.bucket)})
	if err == nil {
		return true, nil
	}
	code, status := errorCode(err)
	switch {
	case status == 404 || code == "NoSuchBucket" || code == "NotFound":
		return false, nil
	case status == 403:
		return false, fmt.Errorf("s3 head-bucket %q: access denied: the bucket belongs to another account or the credentials may not use it: choose another name or fix the IAM policy: %w",
			b.bucket, err)
	case status == 301:
		return false, fmt.Errorf("s3 head-bucket %q: the bucket is in region %q, not %s: use that region: %w",
			b.bucket, responseHeader(err, "X-Amz-Bucket-Region"), b.region, err)
	}
	return false, fmt.Errorf("s3 head-bucket %q: %w", b.bucket, err)
}

// responseHeader returns a header of the HTTP response behind err.
func responseHeader(err error, name string) string {
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) && respErr.Response != nil {
		return respErr.Response.Header.Get(name)
	}
	return ""
}

// CreateBucket implements objstore.BucketAdmin in the client's region.
func (b *Bucket) CreateBucket(ctx context.Context) error {
	in := &s3.CreateBucketInput{Bucket: aws.String(b.bucket)}
	if b.region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{
			LocationConstraint: types.BucketLocationConstraint(b.region),
		}
	} else {
		// In us-east-1 S3 answers 200 to CreateBucket for a bucket the
		// caller already owns, so ask first to keep ErrBucketExists
		// meaningful. Any failure (404, or 403 for another account's
		// bucket) leaves the answer to CreateBucket. A concurrent creator
		// can still slip between the two calls; ownership is proven by
		// tags, not by this error.
		if _, err := b.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b.bucket)}); err == nil {
			return fmt.Errorf("s3 create-bucket %q: %w (owned by these credentials)", b.bucket, objstore.ErrBucketExists)
		}
	}
	_, err := b.client.CreateBucket(ctx, in)
	if err == nil {
		return nil
	}
	switch code, _ := errorCode(err); code {
	case "BucketAlreadyOwnedByYou":
		return fmt.Errorf("s3 create-bucket %q: %w (owned by these credentials)", b.bucket, objstore.ErrBucketExists)
	case "BucketAlreadyExists":
		return fmt.Errorf("s3 create-bucket %q: %w: the name is taken by another account: bucket names are global, choose another name",
			b.bucket, objstore.ErrBucketExists)
	}
	return b.mapError("create-bucket", "", err)
}

// BucketTags implements objstore.BucketAdmin with GetBucketTagging.
func (b *Bucket) BucketTags(ctx context.Context) (map[string]string, error) {
	out, err := b.client.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String(b.bucket)})
	if err != nil {
		if code, _ := errorCode(err); code == "NoSuchTagSet" {
			return map[string]string{}, nil
		}
		return nil, b.mapError("get-bucket-tagging", "", err)
	}
	tags := make(map[string]string, len(out.TagSet))
	for _, t := range out.TagSet {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return tags, nil
}

// SetBucketTags implements objstore.BucketAdmin. S3 rejects an empty tag
// set, so no tags means DeleteBucketTagging.
func (b *Bucket) SetBucketTags(ctx context.Context, tags map[string]string) error {
	if len(tags) == 0 {
		_, err := b.client.DeleteBucketTagging(ctx, &s3.DeleteBucketTaggingInput{Bucket: aws.String(b.bucket)})
		return b.mapError("delete-bucket-tagging", "", err)
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	set := make([]types.Tag, 0, len(keys))
	for _, k := range keys {
		set = append(set, types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	_, err := b.client.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{
		Bucket:  aws.String(b.bucket),
		Tagging: &types.Tagging{TagSet: set},
	})
	return b.mapError("put-bucket-tagging", "", err)
}

// BucketRegion implements objstore.BucketAdmin. HeadBucket's
// x-amz-bucket-region answers in one request; services that do not send
// it are asked with GetBucketLocation.
func (b *Bucket) BucketRegion(ctx context.Context) (string, error) {
	head, err := b.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b.bucket)})
	if err != nil {
		return "", b.mapError("head-bucket", "", err)
	}
	if r := aws.ToString(head.BucketRegion); r != "" {
		return r, nil
	}
	loc, err := b.client.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String(b.bucket)})
	if err != nil {
		return "", b.mapError("get-bucket-location", "", err)
	}
	return locationRegion(string(loc.LocationConstraint)), nil
}

// locationRegion turns a GetBucketLocation answer into a region name: S3
// reports us-east-1 as empty and old eu-west-1 buckets as "EU".
func locationRegion(constraint string) string {
	switch constraint {
	case "":
		return "us-east-1"
	case "EU":
		return "eu-west-1"
	}
	return constraint
}
