// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/local"
)

// Objects is the read-only view of the bucket the registry needs. Errors
// wrap objstore.ErrNotFound and objstore.ErrNotModified as objstore.Store
// does.
type Objects interface {
	// Get reads a small object whole (index.json, manifests).
	Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error)
	// Head returns an object's size.
	Head(ctx context.Context, key string) (objstore.Info, error)
	// Open streams up to length bytes of key starting at offset (fewer
	// when the object ends first).
	Open(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
}

// objectOpener is implemented by the Objects of this package: it opens an
// object with its ETag and size, so index.json is read with its size
// limit enforced while reading.
type objectOpener interface {
	OpenObject(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error)
}

// StoreObjects adapts any objstore.Store. Blobs stream through
// objstore.OpenObject with a Range when the store streams (every Podmin
// store does); a store that does not is read whole and sliced.
func StoreObjects(s objstore.Store) Objects { return storeObjects{s} }

type storeObjects struct{ objstore.Store }

func (s storeObjects) Open(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if offset < 0 || length < 0 {
		return nil, fmt.Errorf("open %q: range %d+%d: %w", key, offset, length, objstore.ErrInvalidRange)
	}
	r, err := objstore.OpenObject(ctx, s.Store, key, objstore.GetOptions{Range: &objstore.Range{Offset: offset, Length: length}})
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (s storeObjects) OpenObject(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	return objstore.OpenObject(ctx, s.Store, key, opts)
}

// LocalObjects adapts a local-directory bucket and streams blobs straight
// from their files. The local store knows the SHA-256 of each object's
// content (objstore.Info.ContentSHA256, computed from the bytes it wrote),
// so a blob whose content digest is its digest is served without hashing
// it again.
func LocalObjects(b *local.Bucket) Objects { return localObjects{b} }

type localObjects struct{ *local.Bucket }

func (b localObjects) Open(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	f, info, err := b.OpenFile(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", key, err)
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("open %q: %w", key, err)
	}
	return &fileRange{LimitedReader: &io.LimitedReader{R: f, N: length}, f: f, info: info}, nil
}

func (b localObjects) OpenObject(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	return b.Bucket.Open(ctx, key, opts)
}

// fileRange is a byte range of an open file. Unwrap exposes the plain
// *io.LimitedReader over the *os.File, which the HTTP server sends with
// sendfile(2) instead of copying through user space.
type fileRange struct {
	*io.LimitedReader
	f    *os.File
	info objstore.Info
}

func (r *fileRange) Close() error { return r.f.Close() }

// Unwrap returns the reader to copy from.
func (r *fileRange) Unwrap() io.Reader { return r.LimitedReader }

// version describes the object version the file holds.
func (r *fileRange) version() objstore.Info { return r.info }

// S3GetObject is the one S3 call S3Objects makes; *s3.Client has it.
type S3GetObject interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// S3Objects serves Get and Head from store (the agent's s3store.Bucket)
// and streams blob ranges with ranged GetObject calls on client, which
// must address the same bucket. Those reads skip the SDK's response
// checksum validation (CRC64 over every byte): the registry verifies each
// blob and manifest against its SHA-256 digest itself, which also names
// the object and marks it bad, so the content is hashed once, not twice.
func S3Objects(store objstore.Store, client S3GetObject, bucket string) Objects {
	return s3Objects{Store: store, client: client, bucket: bucket}
}

type s3Objects struct {
	objstore.Store
	client S3GetObject
	bucket string
}

func (s s3Objects) OpenObject(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	return objstore.OpenObject(ctx, s.Store, key, opts)
}

func (s s3Objects) Open(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)}
	if length > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
	}
	out, err := s.client.GetObject(ctx, in, digestVerified)
	if err != nil {
		var api smithy.APIError
		if errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "NotFound") {
			return nil, fmt.Errorf("open s3://%s/%s: %w", s.bucket, key, objstore.ErrNotFound)
		}
		return nil, fmt.Errorf("open s3://%s/%s: %w", s.bucket, key, err)
	}
	if length == 0 {
		out.Body.Close()
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	return out.Body, nil
}

// digestVerified turns off the SDK's response checksum validation for a
// read whose bytes the registry verifies against their digest: the SDK
// then neither asks for the object's checksum (x-amz-checksum-mode) nor
// computes one while the body streams.
func digestVerified(o *s3.Options) {
	o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
}
