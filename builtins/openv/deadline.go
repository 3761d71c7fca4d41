// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package openv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/objstore"
)

// ErrTimeout marks an operation that ran out of its overall deadline
// (--timeout in the CLI).
var ErrTimeout = errors.New("timed out")

// endpointOf names where a bucket's requests go: the S3 endpoint, or the
// directory of a local bucket.
func endpointOf(b objstore.Store) string {
	switch s := b.(type) {
	case interface{ Endpoint() string }:
		return s.Endpoint()
	case interface{ Dir() string }:
		return "local directory " + s.Dir()
	}
	return "the bucket's endpoint"
}

// deadlineStore names the request and the endpoint in the error of any
// request cut off by the context's deadline, so an operator sees which
// request hung and where, not just "context deadline exceeded".
type deadlineStore struct {
	objstore.Store
	bucket   string
	endpoint string
	timeout  time.Duration
}

func (d *deadlineStore) annotate(ctx context.Context, op, key string, err error) error {
	if err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	limit := "its deadline"
	if d.timeout > 0 {
		limit = "--timeout " + d.timeout.String()
	}
	return fmt.Errorf("%w: %s %s of bucket %s against %s did not finish within %s: check that the endpoint is reachable and answering, or raise --timeout: %w",
		ErrTimeout, op, key, d.bucket, d.endpoint, limit, err)
}

func (d *deadlineStore) Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	o, err := d.Store.Get(ctx, key, opts)
	return o, d.annotate(ctx, "GET", key, err)
}

func (d *deadlineStore) Head(ctx context.Context, key string) (objstore.Info, error) {
	i, err := d.Store.Head(ctx, key)
	return i, d.annotate(ctx, "HEAD", key, err)
}

func (d *deadlineStore) PutIfAbsent(ctx context.Context, key string, data []byte) (string, error) {
	e, err := d.Store.PutIfAbsent(ctx, key, data)
	return e, d.annotate(ctx, "PUT (create-only)", key, err)
}

func (d *deadlineStore) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	e, err := d.Store.PutIfMatch(ctx, key, data, etag)
	return e, d.annotate(ctx, "PUT (if-match)", key, err)
}

func (d *deadlineStore) Put(ctx context.Context, key string, data []byte) (string, error) {
	e, err := d.Store.Put(ctx, key, data)
	return e, d.annotate(ctx, "PUT", key, err)
}

func (d *deadlineStore) Delete(ctx context.Context, key string, ifMatch string) error {
	return d.annotate(ctx, "DELETE", key, d.Store.Delete(ctx, key, ifMatch))
}

// Open streams through the bucket's own streaming reads when it has them.
func (d *deadlineStore) Open(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	r, err := objstore.OpenObject(ctx, d.Store, key, opts)
	return r, d.annotate(ctx, "GET", key, err)
}

// Write streams through the bucket's own streaming writes (which keep
// object metadata) when it has them.
func (d *deadlineStore) Write(ctx context.Context, key string, body io.Reader, size int64, opts objstore.PutOptions) (string, error) {
	e, err := objstore.WriteObject(ctx, d.Store, key, body, size, opts)
	return e, d.annotate(ctx, "PUT", key, err)
}

var _ objstore.Streamer = (*deadlineStore)(nil)

func (d *deadlineStore) List(ctx context.Context, prefix string, opts objstore.ListOptions) (objstore.ListPage, error) {
	p, err := d.Store.List(ctx, prefix, opts)
	return p, d.annotate(ctx, "LIST", prefix, err)
}

// Explain adds what to check to an error from the cluster bucket of
// context c.
func (e *Env) Explain(c contexts.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, objstore.ErrBucketNotFound) {
		return fmt.Errorf("bucket %s of cluster %s does not exist (provider %s, region %s): check the bucket name and region of the context (\"podmin use\" lists them), that the bucket was not deleted, and that the credentials can see it; nothing was changed: %w",
			c.Bucket, c.Cluster, c.Provider, c.Region, err)
	}
	if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrTimeout) {
		limit := "its deadline"
		if e.Timeout > 0 {
			limit = "--timeout " + e.Timeout.String()
		}
		return fmt.Errorf("%w: bucket %s of cluster %s: the operation did not finish within %s: %w", ErrTimeout, c.Bucket, c.Cluster, limit, err)
	}
	return err
}
