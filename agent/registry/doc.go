// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package registry is the node's read-only OCI registry: the pull and
// resolve half of the OCI distribution API (GET/HEAD /v2/, manifests by
// tag and digest, blobs with single byte ranges) served from the apps/ and
// mirror/ image layouts in the cluster bucket.
//
// Every repository, tag and digest is validated before any storage call,
// so a request can reach nothing but apps/<repository> and
// mirror/<upstream>/<repository> as internal/state lays them out. Tags and
// digests resolve through the top-level index.json alone (push lists every
// nested manifest there), which is cached by ETag and refused by its size
// when oversized. Manifests are read (never past their descriptor's size)
// and verified for HEAD and GET alike, within a bound on the manifest
// bytes concurrent requests hold (WithManifestMemory). Blobs are streamed
// and hashed on the way, the hashing a few chunks behind the copy: the
// last chunk is held back until the digest matches, so a tampered blob is
// aborted rather than served complete, logged with its object path, and
// refused (HEAD as GET) until the object changes. On S3 the SDK's own
// response checksum validation is off for these reads: the digest is the
// one check. On a local bucket the store knows the SHA-256 it
// computed from the bytes it wrote (objstore.Info.ContentSHA256), so a
// blob whose content digest is its digest is sent with sendfile(2)
// unhashed, and one with another digest is refused before a byte is
// sent. Unknown routes answer 404.
//
// WriteMetrics exports the bytes served and the refusals by reason.
//
// It must not write to the bucket, list it, or keep any state besides the
// index cache, the bounded sets of verified and refused blob versions and
// its counters;
// it has no discovery, search or garbage collection. Server is the
// agent's component serving it on loopback (Listen and Serve).
package registry
