// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package s3store

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"podmin.dev/podmin/internal/objstore"
)

var _ objstore.Streamer = (*Bucket)(nil)

// Open implements objstore.Streamer with a (ranged) GetObject. The reader
// streams the response body.
func (b *Bucket) Open(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	r := opts.Range
	if r != nil && r.Offset < 0 {
		return nil, fmt.Errorf("s3 open s3://%s/%s: range offset %d: %w", b.bucket, key, r.Offset, objstore.ErrInvalidRange)
	}
	if r != nil && r.Length == 0 {
		// HTTP cannot ask for zero bytes; HEAD answers everything else.
		return b.openEmpty(ctx, key, opts)
	}
	in := &s3.GetObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)}
	if opts.IfNoneMatch != "" {
		in.IfNoneMatch = aws.String(opts.IfNoneMatch)
	}
	if r != nil && (r.Offset > 0 || r.Length > 0) {
		spec := "bytes=" + strconv.FormatInt(r.Offset, 10) + "-"
		if r.Length > 0 {
			spec += strconv.FormatInt(r.Offset+r.Length-1, 10)
		}
		in.Range = aws.String(spec)
	}
	out, err := b.client.GetObject(ctx, in)
	if err != nil {
		if code, status := errorCode(err); status == 416 || code == "InvalidRange" {
			// A range starting exactly at the end is empty, not invalid.
			return b.openEmpty(ctx, key, opts)
		}
		return nil, b.mapError("open", key, err)
	}
	info := objstore.Info{
		Key:          key,
		ETag:         aws.ToString(out.ETag),
		Size:         aws.ToInt64(out.ContentLength),
		LastModified: aws.ToTime(out.LastModified),
		Metadata:     objstore.CloneMetadata(out.Metadata),
	}
	if in.Range != nil {
		total, ok := contentRangeTotal(aws.ToString(out.ContentRange))
		if !ok {
			out.Body.Close()
			return nil, fmt.Errorf("s3 open s3://%s/%s: ranged answer without a usable Content-Range (%q)", b.bucket, key, aws.ToString(out.ContentRange))
		}
		info.Size = total
	}
	return &objstore.Reader{ReadCloser: out.Body, Info: info}, nil
}

// openEmpty answers a range that selects no bytes, after checking it
// against the object's size with HEAD.
func (b *Bucket) openEmpty(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	info, err := b.Head(ctx, key)
	if err != nil {
		return nil, err
	}
	if opts.IfNoneMatch != "" && strings.Trim(opts.IfNoneMatch, `"`) == strings.Trim(info.ETag, `"`) {
		return nil, fmt.Errorf("s3 open s3://%s/%s: %w", b.bucket, key, objstore.ErrNotModified)
	}
	if _, _, err := objstore.CheckRange(opts.Range, info.Size); err != nil {
		return nil, fmt.Errorf("s3 open s3://%s/%s: %w", b.bucket, key, err)
	}
	return &objstore.Reader{ReadCloser: io.NopCloser(bytes.NewReader(nil)), Info: info}, nil
}

// contentRangeTotal returns the full size from "bytes a-b/total".
func contentRangeTotal(cr string) (int64, bool) {
	_, total, ok := strings.Cut(cr, "/")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(total, 10, 64)
	return n, err == nil && n >= 0
}

// Write implements objstore.Streamer with PutObject, carrying opts.Metadata
// as x-amz-meta-* headers and the conditions as If-Match or
// If-None-Match: *.
func (b *Bucket) Write(ctx context.Context, key string, body io.Reader, size int64, opts objstore.PutOptions) (string, error) {
	op := writeOp(opts)
	if err := objstore.CheckPutOptions(opts); err != nil {
		return "", fmt.Errorf("s3 %s s3://%s/%s: %w", op, b.bucket, key, err)
	}
	data, err := objstore.ReadExactly(body, size)
	if err != nil {
		return "", fmt.Errorf("s3 %s s3://%s/%s: %w", op, b.bucket, key, err)
	}
	return b.putObject(ctx, op, key, bytes.NewReader(data), size, opts)
}

// putObject sends one PutObject with the conditions and metadata of opts.
func (b *Bucket) putObject(ctx context.Context, op, key string, body io.ReadSeeker, size int64, opts objstore.PutOptions) (string, error) {
	in := &s3.PutObjectInput{
		Bucket:        aws.String(b.bucket),
		Key:           aws.String(key),
		Body:          body,
		ContentLength: aws.Int64(size),
	}
	if len(opts.Metadata) > 0 {
		in.Metadata = opts.Metadata
	}
	switch {
	case opts.IfAbsent:
		in.IfNoneMatch = aws.String("*")
	case opts.IfMatch != "":
		in.IfMatch = aws.String(opts.IfMatch)
	default:
		out, err := b.client.PutObject(ctx, in)
		if err != nil {
			return "", b.mapError(op, key, err)
		}
		return aws.ToString(out.ETag), nil
	}
	out, err := b.client.PutObject(ctx, in, b.withConditionalRetries)
	if err != nil {
		return "", b.conditionalError(op, key, err)
	}
	return aws.ToString(out.ETag), nil
}

// writeOp names a write in errors, as the buffered methods do.
func writeOp(opts objstore.PutOptions) string {
	switch {
	case opts.IfAbsent:
		return "put-if-absent"
	case opts.IfMatch != "":
		return "put-if-match"
	}
	return "put"
}
