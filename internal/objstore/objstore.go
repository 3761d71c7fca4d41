// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package objstore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Implementations wrap them so callers match with errors.Is.
var (
	// ErrNotFound reports a missing object in a bucket that exists.
	ErrNotFound = errors.New("object not found")
	// ErrBucketNotFound reports that the bucket itself is missing (S3
	// NoSuchBucket, a local bucket directory that is absent or lacks the
	// store's .podmin metadata). It never wraps ErrNotFound: a missing
	// bucket is never "object absent", so no caller mistakes it for empty
	// state.
	ErrBucketNotFound = errors.New("bucket not found")
	// ErrPrecondition reports a failed If-Match or If-None-Match: * condition
	// on a write or delete. S3's 412 and 409 both map here.
	ErrPrecondition = errors.New("precondition failed")
	// ErrNotModified reports a conditional get whose If-None-Match equalled
	// the current ETag.
	ErrNotModified = errors.New("not modified")
	// ErrBucketExists reports that CreateBucket found the bucket already there.
	// It says nothing about who owns it: ownership is proven by tags only.
	ErrBucketExists = errors.New("bucket already exists")
	// ErrNotApplied reports a write that the store certainly did not
	// apply: the request never reached it (no connection could be made) or
	// its body ended before it was complete. A failed write without it
	// may have been applied, and only reading the object can tell.
	ErrNotApplied = errors.New("the request was not applied")
)

// Object is the content of one object with the ETag it was read at.
type Object struct {
	Data []byte
	ETag string
	// Metadata is the object's user metadata; nil or empty when it has none.
	Metadata map[string]string
}

// Info describes an object without its content.
type Info struct {
	Key          string
	ETag         string
	Size         int64
	LastModified time.Time
	// Metadata is the object's user metadata from Head (nil or empty when
	// it has none). Listings leave it nil, as S3 does.
	Metadata map[string]string
	// ContentSHA256, when set, is the hex SHA-256 of the content of the
	// version described, as the store computed it from the bytes
	// themselves: the local store's records and the overlay's own objects
	// know it; S3 ETags are no content digest, so it is empty there.
	ContentSHA256 string
}

// GetOptions are optional conditions on Get.
type GetOptions struct {
	// IfNoneMatch, when set, makes Get return ErrNotModified if the object's
	// current ETag equals it.
	IfNoneMatch string
	// Range selects part of the object. Only Open honours it; Get always
	// returns the whole object.
	Range *Range
}

// Range selects bytes [Offset, Offset+Length) of an object; Length < 0
// means to the end. An Offset beyond the object's size is ErrInvalidRange;
// a range reaching past the end is cut at the end, as in HTTP.
type Range struct {
	Offset, Length int64
}

// ListOptions select one page of a listing.
type ListOptions struct {
	// StartAfter lists keys strictly greater than it (S3 semantics). Pass
	// the previous page's NextStartAfter to continue.
	StartAfter string
	// MaxKeys bounds the page size; zero means the implementation default
	// (1000, as in S3).
	MaxKeys int
}

// ListPage is one page of keys in ascending byte order.
type ListPage struct {
	Objects []Info
	// Truncated reports that more keys follow; NextStartAfter continues.
	Truncated      bool
	NextStartAfter string
}

// Store is the object contract Podmin relies on. ETags are opaque strings
// that are passed back unchanged. Every method is safe for concurrent use,
// also across processes for the same bucket.
type Store interface {
	// Get returns the object's bytes and ETag.
	Get(ctx context.Context, key string, opts GetOptions) (Object, error)
	// Head returns the object's metadata.
	Head(ctx context.Context, key string) (Info, error)
	// PutIfAbsent writes only when no object exists at key (If-None-Match: *),
	// otherwise ErrPrecondition.
	PutIfAbsent(ctx context.Context, key string, data []byte) (etag string, err error)
	// PutIfMatch replaces the object only while its ETag equals etag
	// (If-Match), otherwise ErrPrecondition; a missing object is ErrNotFound
	// or ErrPrecondition depending on the service.
	PutIfMatch(ctx context.Context, key string, data []byte, etag string) (newETag string, err error)
	// Put writes unconditionally.
	Put(ctx context.Context, key string, data []byte) (etag string, err error)
	// Delete removes the object. With ifMatch set the delete happens only
	// while the ETag equals it (ErrPrecondition otherwise). Deleting a missing
	// object unconditionally succeeds.
	Delete(ctx context.Context, key string, ifMatch string) error
	// List returns one page of objects whose keys start with prefix.
	List(ctx context.Context, prefix string, opts ListOptions) (ListPage, error)
}

// BucketAdmin manages the bucket itself. Connect uses it; nothing else should.
type BucketAdmin interface {
	// BucketExists reports whether the bucket exists and is reachable.
	BucketExists(ctx context.Context) (bool, error)
	// CreateBucket creates the bucket, or returns ErrBucketExists.
	CreateBucket(ctx context.Context) error
	// BucketTags returns the bucket's tags (empty when it has none).
	BucketTags(ctx context.Context) (map[string]string, error)
	// SetBucketTags replaces the bucket's tags.
	SetBucketTags(ctx context.Context, tags map[string]string) error
	// BucketRegion returns the region the bucket lives in.
	BucketRegion(ctx context.Context) (string, error)
}

// Bucket is a Store together with its administration.
type Bucket interface {
	Store
	BucketAdmin
}

// ListAll pages through every object under prefix. It is bounded by the
// listing itself; a store that never stops truncating is an error after
// maxPages pages.
func ListAll(ctx context.Context, s Store, prefix string) ([]Info, error) {
	const maxPages = 1 << 20
	var all []Info
	opts := ListOptions{}
	for page := 0; page < maxPages; page++ {
		p, err := s.List(ctx, prefix, opts)
		if err != nil {
			return nil, err
		}
		all = append(all, p.Objects...)
		if !p.Truncated {
			return all, nil
		}
		if p.NextStartAfter == "" || p.NextStartAfter <= opts.StartAfter {
			return nil, fmt.Errorf("list %q: store returned a truncated page without progress", prefix)
		}
		opts.StartAfter = p.NextStartAfter
	}
	return nil, fmt.Errorf("list %q: more than %d pages", prefix, maxPages)
}
