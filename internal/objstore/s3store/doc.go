// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package s3store implements objstore.Bucket on Amazon S3 (and S3-compatible
// services) with aws-sdk-go-v2.
//
// It owns the translation between the objstore contract and the S3 API:
// client configuration (the SDK's standard credential, profile, region and
// endpoint chain; dual-stack endpoints on AWS, path-style addressing on a
// custom endpoint), conditional requests (If-Match, If-None-Match), listing,
// bucket administration, and the mapping of S3 errors onto the objstore
// sentinels.
//
// It must not interpret keys or object contents, cache objects, or retry a
// conditional write in a way that could turn a lost response into a false
// ErrPrecondition: whether a write happened is for the caller to resolve.
// It must not create buckets implicitly; only CreateBucket does that.
package s3store
