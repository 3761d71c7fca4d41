// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package s3store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"podmin.dev/podmin/internal/objstore"
)

// ErrBucketNotEmpty reports a DeleteBucket of a bucket that still holds
// objects (S3's BucketNotEmpty).
var ErrBucketNotEmpty = errors.New("bucket is not empty")

// DeleteBucket deletes the empty bucket; a missing bucket is ErrBucketNotFound.
func (b *Bucket) DeleteBucket(ctx context.Context) error {
	_, err := b.client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(b.bucket)})
	if err == nil {
		return nil
	}
	code, status := errorCode(err)
	switch {
	case status == 404 || code == "NoSuchBucket":
		return fmt.Errorf("s3 delete-bucket %q: %w", b.bucket, objstore.ErrBucketNotFound)
	case code == "BucketNotEmpty":
		return fmt.Errorf("s3 delete-bucket %q: %w: %w", b.bucket, ErrBucketNotEmpty, err)
	}
	return fmt.Errorf("s3 delete-bucket %q: %w", b.bucket, err)
}
