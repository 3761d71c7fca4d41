// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"podmin.dev/podmin/internal/objstore"
)

// Objects is the part of the object store this package uses: conditional
// reads and compare-and-swap writes. objstore.Store satisfies it; keeping
// it narrow keeps the package independent of the store's other methods.
type Objects interface {
	Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error)
	PutIfAbsent(ctx context.Context, key string, data []byte) (string, error)
	PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error)
}

var _ Objects = objstore.Store(nil)

func isNotFound(err error) bool { return errors.Is(err, objstore.ErrNotFound) }

func isPrecondition(err error) bool { return errors.Is(err, objstore.ErrPrecondition) }

func isNotModified(err error) bool { return errors.Is(err, objstore.ErrNotModified) }

func getOpts(ifNoneMatch string) objstore.GetOptions {
	return objstore.GetOptions{IfNoneMatch: ifNoneMatch}
}

// putCAS writes data at key: create-only when etag is empty, otherwise only
// while the object is still at etag. A missing object under If-Match is a
// lost race as well.
func putCAS(ctx context.Context, o Objects, key string, data []byte, etag string) (string, error) {
	var (
		newETag string
		err     error
	)
	if etag == "" {
		newETag, err = o.PutIfAbsent(ctx, key, data)
	} else {
		newETag, err = o.PutIfMatch(ctx, key, data, etag)
	}
	if isPrecondition(err) || (etag != "" && isNotFound(err)) {
		return "", fmt.Errorf("%w: %s changed since it was read", ErrSuperseded, key)
	}
	return newETag, err
}

// External is the --workload-ca-publish destination: one exact object in
// an operator-owned bucket.
type External struct {
	// Store is the destination bucket.
	Store Objects
	// Key is the object's key.
	Key string
}

// ParseExternalURL splits s3://BUCKET/KEY as --workload-ca-publish takes
// it.
func ParseExternalURL(s string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	bucket, key, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || bucket == "" || key == "" || strings.HasSuffix(key, "/") {
		return "", "", fmt.Errorf("--workload-ca-publish %q is not s3://BUCKET/KEY: name one exact object dedicated to Podmin", s)
	}
	return bucket, key, nil
}
