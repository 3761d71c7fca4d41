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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

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
	if opts.IfNoneMatch != "" && objstore.SameETag(opts.IfNoneMatch, info.ETag) {
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

// MultipartThreshold is the size above which Write uploads in parts.
const MultipartThreshold = 64 << 20

// conditionalPutLimit is the largest conditional write sent as one
// PutObject. Above it the SDK asks for 100-continue, and a service that
// answers a failed condition before reading the body and then resets the
// connection (versitygw does) loses the 412: the caller would see an
// ambiguous failure instead of ErrPrecondition. Larger conditional writes
// therefore go through a multipart upload, whose small completing request
// carries the condition.
const conditionalPutLimit = 2 << 20

// partSize is the size of each part of a multipart upload. A part is held
// in memory only when the body cannot be read at an offset.
const partSize = 16 << 20

// Write implements objstore.Streamer. Up to MultipartThreshold bytes go in
// one PutObject (conditional writes: up to conditionalPutLimit); larger
// objects in a multipart upload whose completing request carries the
// conditions, so a failed condition leaves nothing.
// opts.Metadata travels as x-amz-meta-* headers. A body that is not
// exactly size bytes long is ErrSizeMismatch and writes nothing.
//
// Bodies that can seek (files, byte slices) are sent as they are, after
// checking their length. Other bodies are streamed with a trailing
// checksum over HTTPS; over plain HTTP the SDK must rewind a body to sign
// it, so such a body is buffered one part at a time.
func (b *Bucket) Write(ctx context.Context, key string, body io.Reader, size int64, opts objstore.PutOptions) (string, error) {
	op := writeOp(opts)
	where := fmt.Sprintf("s3 %s s3://%s/%s", op, b.bucket, key)
	if err := objstore.CheckPutOptions(opts); err != nil {
		return "", fmt.Errorf("%s: %w", where, err)
	}
	if size < 0 {
		return "", fmt.Errorf("%s: negative size %d: %w", where, size, objstore.ErrSizeMismatch)
	}
	ra, seekable := seekableSection(body)
	if seekable {
		if err := checkRemaining(ra, size); err != nil {
			return "", fmt.Errorf("%s: %w", where, err)
		}
	}
	conditional := opts.IfAbsent || opts.IfMatch != ""
	// Over plain HTTP a body that cannot seek is buffered: in parts, so
	// that no more than one part is held in memory.
	buffered := !seekable && !b.https
	if size > b.multipartThreshold || (conditional && size > conditionalPutLimit) || (buffered && size > b.partSize) {
		return b.writeMultipart(ctx, op, key, body, size, opts)
	}
	if seekable {
		// Length checked above: PutObject sends exactly size bytes.
		return b.putObject(ctx, op, key, body, size, opts)
	}
	if b.https {
		er := &exactReader{r: body, remaining: size, size: size}
		etag, err := b.putObject(ctx, op, key, unseekable{er}, size, opts, noRetries)
		if err != nil && er.err != nil {
			// The body failed, so the request was incomplete and S3
			// stored nothing.
			return "", fmt.Errorf("%s: nothing was written: %w", where, er.err)
		}
		return etag, err
	}
	data, err := objstore.ReadExactly(body, size)
	if err != nil {
		return "", fmt.Errorf("%s: %w", where, err)
	}
	return b.putObject(ctx, op, key, bytes.NewReader(data), size, opts)
}

// readerAtSeeker is a body that can be read at offsets and measured.
type readerAtSeeker interface {
	io.ReaderAt
	io.Seeker
}

// seekableSection reports whether body can be uploaded in sections read
// at offsets from its current position.
func seekableSection(body io.Reader) (readerAtSeeker, bool) {
	ra, ok := body.(readerAtSeeker)
	return ra, ok
}

// checkRemaining checks that exactly size bytes follow the current
// position of ra, which it leaves unchanged.
func checkRemaining(ra readerAtSeeker, size int64) error {
	pos, err := ra.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	end, err := ra.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if _, err := ra.Seek(pos, io.SeekStart); err != nil {
		return err
	}
	if end-pos != size {
		return fmt.Errorf("body holds %d bytes, not %d: %w", end-pos, size, objstore.ErrSizeMismatch)
	}
	return nil
}

// exactReader yields exactly size bytes of r and fails, instead of
// ending, when r is shorter or longer, so that a wrong body aborts the
// request rather than storing a truncated object.
type exactReader struct {
	r         io.Reader
	remaining int64
	size      int64
	// err is the body's own failure, kept because the SDK reports a
	// failed stream in its own words.
	err error
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.remaining == 0 {
		if err := objstore.ExpectEOF(e.r, e.size); err != nil {
			e.err = err
			return 0, err
		}
		return 0, io.EOF
	}
	if int64(len(p)) > e.remaining {
		p = p[:e.remaining]
	}
	n, err := e.r.Read(p)
	e.remaining -= int64(n)
	switch {
	case errors.Is(err, io.EOF) && e.remaining > 0:
		err = fmt.Errorf("body ended after %d of %d bytes: %w", e.size-e.remaining, e.size, objstore.ErrSizeMismatch)
	case errors.Is(err, io.EOF):
		err = nil
	}
	if err != nil {
		e.err = err
	}
	return n, err
}

// noRetries makes one attempt only: a streamed body cannot be sent twice.
func noRetries(o *s3.Options) { o.Retryer = aws.NopRetryer{} }

// unseekable hides any Seek method so the SDK streams the body.
type unseekable struct{ io.Reader }

// writeMultipart uploads body in parts and completes the upload under the
// conditions of opts. Every failure aborts the upload.
func (b *Bucket) writeMultipart(ctx context.Context, op, key string, body io.Reader, size int64, opts objstore.PutOptions) (etag string, err error) {
	where := fmt.Sprintf("s3 %s s3://%s/%s", op, b.bucket, key)
	create := &s3.CreateMultipartUploadInput{Bucket: aws.String(b.bucket), Key: aws.String(key)}
	if len(opts.Metadata) > 0 {
		create.Metadata = opts.Metadata
	}
	up, err := b.client.CreateMultipartUpload(ctx, create)
	if err != nil {
		return "", b.mapError(op+" (create multipart upload)", key, err)
	}
	uploadID := up.UploadId
	defer func() {
		if err == nil {
			return
		}
		// Abort even when ctx is done, so no parts are left billed.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = b.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{
			Bucket: aws.String(b.bucket), Key: aws.String(key), UploadId: uploadID,
		})
	}()
	ra, sectioned := seekableSection(body)
	var start int64
	if sectioned {
		if start, err = ra.Seek(0, io.SeekCurrent); err != nil {
			return "", fmt.Errorf("%s: %w", where, err)
		}
	}
	nparts := (size + b.partSize - 1) / b.partSize
	parts := make([]types.CompletedPart, nparts)
	if sectioned {
		err = b.uploadSections(ctx, op, key, uploadID, ra, start, size, parts)
	} else {
		err = b.uploadBuffered(ctx, op, key, uploadID, body, size, parts)
	}
	if err != nil {
		return "", err
	}
	if !sectioned {
		if err := objstore.ExpectEOF(body, size); err != nil {
			return "", fmt.Errorf("%s: %w", where, err)
		}
	}
	complete := &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(b.bucket), Key: aws.String(key), UploadId: uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}
	switch {
	case opts.IfAbsent:
		complete.IfNoneMatch = aws.String("*")
	case opts.IfMatch != "":
		complete.IfMatch = aws.String(opts.IfMatch)
	default:
		out, err := b.client.CompleteMultipartUpload(ctx, complete)
		if err != nil {
			return "", b.mapError(op, key, err)
		}
		return aws.ToString(out.ETag), nil
	}
	out, err := b.client.CompleteMultipartUpload(ctx, complete, b.withConditionalRetries)
	if err != nil {
		return "", b.conditionalError(op, key, err)
	}
	return aws.ToString(out.ETag), nil
}

// putObject sends one PutObject with the conditions and metadata of opts.
func (b *Bucket) putObject(ctx context.Context, op, key string, body io.Reader, size int64, opts objstore.PutOptions, optFns ...func(*s3.Options)) (string, error) {
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
		out, err := b.client.PutObject(ctx, in, optFns...)
		if err != nil {
			return "", b.mapError(op, key, err)
		}
		return aws.ToString(out.ETag), nil
	}
	// Later options win: a streamed body is never retried.
	out, err := b.client.PutObject(ctx, in, append([]func(*s3.Options){b.withConditionalRetries}, optFns...)...)
	if err != nil {
		return "", b.conditionalError(op, key, err)
	}
	return aws.ToString(out.ETag), nil
}

// partConcurrency is how many parts of a body read at offsets (a file)
// are uploaded at once. Buffered bodies go one part at a time, so that a
// write holds at most one part in memory.
const partConcurrency = 4

// uploadSections uploads parts read at offsets from ra, several at once.
func (b *Bucket) uploadSections(ctx context.Context, op, key string, uploadID *string, ra io.ReaderAt, start, size int64, parts []types.CompletedPart) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	sem := make(chan struct{}, partConcurrency)
	for i := range parts {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		off := int64(i) * b.partSize
		length := min(b.partSize, size-off)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			n := int32(i + 1)
			out, err := b.client.UploadPart(ctx, &s3.UploadPartInput{
				Bucket: aws.String(b.bucket), Key: aws.String(key), UploadId: uploadID,
				PartNumber: aws.Int32(n), Body: io.NewSectionReader(ra, start+off, length), ContentLength: aws.Int64(length),
			})
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = b.mapError(fmt.Sprintf("%s (upload part %d)", op, n), key, err)
					cancel()
				}
				mu.Unlock()
				return
			}
			parts[i] = types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// uploadBuffered uploads parts read from body one at a time through one
// buffer.
func (b *Bucket) uploadBuffered(ctx context.Context, op, key string, uploadID *string, body io.Reader, size int64, parts []types.CompletedPart) error {
	buf := make([]byte, min(b.partSize, size))
	for i := range parts {
		n := int32(i + 1)
		off := int64(i) * b.partSize
		length := min(b.partSize, size-off)
		if _, err := io.ReadFull(body, buf[:length]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				err = fmt.Errorf("body ended before %d bytes: %w", size, objstore.ErrSizeMismatch)
			}
			return fmt.Errorf("s3 %s s3://%s/%s: %w", op, b.bucket, key, err)
		}
		out, err := b.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: aws.String(b.bucket), Key: aws.String(key), UploadId: uploadID,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(buf[:length]), ContentLength: aws.Int64(length),
		})
		if err != nil {
			return b.mapError(fmt.Sprintf("%s (upload part %d)", op, n), key, err)
		}
		parts[i] = types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)}
	}
	return nil
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
