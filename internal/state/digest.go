// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"

	"podmin.dev/podmin/internal/objstore"
)

// ErrCorruptPayload reports payload bytes that do not hash to the digest in
// their path.
var ErrCorruptPayload = errors.New("payload does not match its digest")

// sha512Hex is the lowercase hex SHA-512 of data.
func sha512Hex(data []byte) string {
	sum := sha512.Sum512(data)
	return hex.EncodeToString(sum[:])
}

// PodPayloadPath is the content-addressed path of a NodeGroup's Pod YAML:
// the SHA-512 of exactly these bytes, so identical payloads share one object.
func PodPayloadPath(nodegroup string, podYAML []byte) (string, error) {
	return PodPath(nodegroup, sha512Hex(podYAML))
}

// ServicePayloadPath is the content-addressed path of a Service YAML; the
// path also carries the Service identity <namespace>/<service>.
func ServicePayloadPath(namespace, service string, serviceYAML []byte) (string, error) {
	return ServicePath(namespace, service, sha512Hex(serviceYAML))
}

// payloadDigest returns the hex SHA-512 digest a Pod or Service payload path
// promises.
func payloadDigest(p string) (string, error) {
	if _, d, err := ParsePodPath(p); err == nil {
		return d, nil
	}
	if _, d, err := ParseServicePath(p); err == nil {
		return d, nil
	}
	return "", fmt.Errorf("%q is neither a Pod nor a Service payload path: expected %s<nodegroup>/pods/sha512/<digest>.yaml or %s<namespace>/<service>/sha512/<digest>.yaml",
		p, NodeGroupsPrefix, ServicesPrefix)
}

// VerifyPayload checks that data is what the payload path p names: its
// SHA-512 equals the digest in p. The error wraps ErrCorruptPayload when the
// bytes differ.
func VerifyPayload(p string, data []byte) error {
	want, err := payloadDigest(p)
	if err != nil {
		return err
	}
	if got := sha512Hex(data); got != want {
		return fmt.Errorf("%w: object %q hashes to sha512 %s…, not the digest in its path: deploy it again (an identical deploy replaces the object)",
			ErrCorruptPayload, p, got[:16])
	}
	return nil
}

// FetchPayload reads a Pod or Service payload and verifies it against the
// digest in its path, so a reader never acts on bytes the index did not
// commit.
func FetchPayload(ctx context.Context, store objstore.Store, p string) ([]byte, error) {
	if _, err := payloadDigest(p); err != nil {
		return nil, err
	}
	obj, err := store.Get(ctx, p, objstore.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read payload %q: %w", p, err)
	}
	if err := VerifyPayload(p, obj.Data); err != nil {
		return nil, err
	}
	return obj.Data, nil
}

// PayloadCache is a local store of payload bytes by the hex SHA-512 digest
// of the bytes (internal/cache implements it). Payloads are immutable, so a
// verified copy never goes stale. Get must return only bytes that hash to
// digest (internal/cache checks every read), so callers do not hash again.
type PayloadCache interface {
	Get(digest string) ([]byte, bool)
	Put(digest string, data []byte) error
}

// FetchPayloadCached returns the bytes payload path p names, through a
// payload cache: a hit costs no request, and a miss is fetched, verified
// and stored (with its stamp, when the cache keeps them). A nil cache
// fetches. A hit says nothing about the bucket: it serves what the bytes
// say (a namespace, a name), never whether the object is still there or
// intact; ReadListed answers that.
func FetchPayloadCached(ctx context.Context, store objstore.Store, cache PayloadCache, p string) ([]byte, error) {
	digest, err := payloadDigest(p)
	if err != nil {
		return nil, err
	}
	if cache != nil {
		if data, ok := cache.Get(digest); ok {
			return data, nil
		}
	}
	return fetchVerified(ctx, store, cache, p)
}
