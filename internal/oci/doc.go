// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package oci owns Podmin's OCI image handling outside the node: the local
// image store (one OCI image layout per repository under the Podmin cache
// directory, tags held as bare org.opencontainers.image.ref.name
// annotations), pulling a complete remote index into it, and pushing an
// index from it into a cluster bucket layout (blobs first, then oci-layout,
// then an index.json merged with compare-and-swap).
//
// Blobs are streamed, never held whole: a push reads each blob from its
// local file and writes it with objstore.WriteObject while verifying its
// digest in a prefetching goroutine (a mismatch fails the write before
// its last byte, so nothing is stored); pulled and built blobs reach the
// local store through a digesting writer into a temporary file renamed to
// the digest. Small JSON objects (index.json, manifests) are read whole,
// but never more than their size limit plus one byte.
//
// Bucket paths come from internal/state and reference rules from
// internal/manifest; this package must not define either again. It never
// serves images: the node's read-only registry is agent/registry.
package oci
