// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"podmin.dev/podmin/internal/objstore"
)

// Get implements objstore.Store.
func (b *Bucket) Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)}
	if opts.IfNoneMatch != "" {
		in.IfNoneMatch = aws.String(opts.IfNoneMatch)
	}
	out, err := b.client.GetObject(ctx, in)
	if err != nil {
		return objstore.Object{}, b.mapError("get", key, err)
	}
	defer out.Body.Close()
	data, err := readBody(out.Body, aws.ToInt64(out.ContentLength))
	if err != nil {
		return objstore.Object{}, fmt.Errorf("s3 get s3://%s/%s: read body: %w", b.bucket, key, err)
	}
	return objstore.Object{Data: data, ETag: aws.ToString(out.ETag), Metadata: objstore.CloneMetadata(out.Metadata)}, nil
}

// maxPrealloc bounds the buffer Get sizes from the announced length before
// any byte arrives; a larger body grows as it is read.
const maxPrealloc = 64 << 20

// readBody reads a response body whose announced length is size (0 or
// less when unknown) into a buffer sized for it, so a large object is
// not copied again each time a growing buffer doubles.
func readBody(body io.Reader, size int64) ([]byte, error) {
	var buf bytes.Buffer
	if size > 0 {
		buf.Grow(int(min(size, maxPrealloc)) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(body); err != nil {
		return nil, err
	}
	if buf.Len() == 0 {
		return []byte{}, nil // an empty object is empty data, not none
	}
	return buf.Bytes(), nil
}

// Head implements objstore.Store. A HEAD answer carries no error code, so a
// 404 is followed by a HEAD of the bucket to tell a missing object from a
// missing bucket.
func (b *Bucket) Head(ctx context.Context, key string) (objstore.Info, error) {
	out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)})
	if err != nil {
		return objstore.Info{}, b.headError(ctx, "head", key, err)
	}
	return objstore.Info{
		Key:          key,
		ETag:         aws.ToString(out.ETag),
		Size:         aws.ToInt64(out.ContentLength),
		LastModified: aws.ToTime(out.LastModified),
		Metadata:     objstore.CloneMetadata(out.Metadata),
	}, nil
}

// headError maps the error of a HEAD of key. A 404 without a code may mean
// a missing bucket; HeadBucket decides.
func (b *Bucket) headError(ctx context.Context, op, key string, err error) error {
	mapped := b.mapError(op, key, err)
	if !errors.Is(mapped, objstore.ErrNotFound) {
		return mapped
	}
	_, berr := b.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b.bucket)})
	if berr == nil {
		return mapped
	}
	if code, status := errorCode(berr); status == 404 || code == "NoSuchBucket" || code == "NotFound" {
		return b.bucketNotFound(fmt.Sprintf("s3 %s s3://%s/%s", op, b.bucket, key), berr)
	}
	// Whether the bucket exists is unknown: reporting the object as
	// missing could make a caller treat a missing bucket as empty state.
	return fmt.Errorf("s3 %s s3://%s/%s: the object is missing and the bucket could not be checked: %w",
		op, b.bucket, key, b.mapError("head-bucket", "", berr))
}

// PutIfAbsent implements objstore.Store with If-None-Match: *.
func (b *Bucket) PutIfAbsent(ctx context.Context, key string, data []byte) (string, error) {
	return b.putObject(ctx, "put-if-absent", key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{IfAbsent: true})
}

// PutIfMatch implements objstore.Store with If-Match. S3 answers a missing
// object with 404, so that case is ErrNotFound.
func (b *Bucket) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	if etag == "" {
		return "", fmt.Errorf("s3 put-if-match s3://%s/%s: empty etag: read the object first", b.bucket, key)
	}
	return b.putObject(ctx, "put-if-match", key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{IfMatch: etag})
}

// Put implements objstore.Store.
func (b *Bucket) Put(ctx context.Context, key string, data []byte) (string, error) {
	return b.putObject(ctx, "put", key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{})
}

// withConditionalRetries swaps in the conditional retry policy for one call.
func (b *Bucket) withConditionalRetries(o *s3.Options) { o.Retryer = b.condRetryer }

// Delete implements objstore.Store. An unconditional delete of a missing
// object succeeds, as in S3.
func (b *Bucket) Delete(ctx context.Context, key string, ifMatch string) error {
	in := &s3.DeleteObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)}
	if ifMatch == "" {
		_, err := b.client.DeleteObject(ctx, in)
		return b.mapError("delete", key, err)
	}
	in.IfMatch = aws.String(ifMatch)
	_, err := b.client.DeleteObject(ctx, in, b.withConditionalRetries)
	if err != nil {
		return b.conditionalError("delete-if-match", key, err)
	}
	return nil
}

// List implements objstore.Store with ListObjectsV2.
func (b *Bucket) List(ctx context.Context, prefix string, opts objstore.ListOptions) (objstore.ListPage, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(b.bucket)}
	if prefix != "" {
		in.Prefix = aws.String(prefix)
	}
	if opts.StartAfter != "" {
		in.StartAfter = aws.String(opts.StartAfter)
	}
	if opts.MaxKeys > 0 {
		in.MaxKeys = aws.Int32(int32(min(opts.MaxKeys, 1000)))
	}
	out, err := b.client.ListObjectsV2(ctx, in)
	if err != nil {
		return objstore.ListPage{}, b.mapError("list", prefix+"*", err)
	}
	page := objstore.ListPage{
		Objects:   make([]objstore.Info, 0, len(out.Contents)),
		Truncated: aws.ToBool(out.IsTruncated),
	}
	for _, o := range out.Contents {
		page.Objects = append(page.Objects, objstore.Info{
			Key:          aws.ToString(o.Key),
			ETag:         aws.ToString(o.ETag),
			Size:         aws.ToInt64(o.Size),
			LastModified: aws.ToTime(o.LastModified),
		})
	}
	if page.Truncated {
		if len(page.Objects) == 0 {
			return objstore.ListPage{}, fmt.Errorf("s3 list s3://%s/%s*: truncated page without keys after %q: the service does not page by StartAfter",
				b.bucket, prefix, opts.StartAfter)
		}
		page.NextStartAfter = page.Objects[len(page.Objects)-1].Key
	}
	return page, nil
}
