// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package objstore defines the small object-storage contract that all of
// Podmin's cluster state is built on: conditional reads and writes keyed by
// ETag, create-only writes, conditional deletes and paginated listing.
//
// Stores that stream (Streamer) also read ranges of an object and write
// bodies of a known size without holding them in memory, with the same
// conditions and user metadata; OpenObject, WriteObject and PutWithOptions
// use a store's Streamer when it has one. A missing bucket is always
// ErrBucketNotFound, never ErrNotFound, so that no caller mistakes it for
// an empty one.
//
// Implementations live in sub-packages (local for a directory bucket, s3store
// for any S3-compatible service). The package must not know about cluster
// layout, deployments or providers; internal/state owns what the keys mean.
package objstore
