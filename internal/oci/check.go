// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// CheckPublished reports what keeps the image index top from being served
// whole out of the bucket layout dst, although an index.json may tag it:
// a manifest or index blob that is missing or does not match its digest,
// or a config or layer blob that is missing or that Push would not skip
// (another size, or content the store knows to differ). Manifests and
// indexes are read from the bucket and checked against their digests;
// every other blob costs one Head. A missing or damaged manifest ends the
// check, since what lies below it cannot be listed without it.
//
// No problems means every blob is in place as far as Push itself would
// judge; a request that fails is an error, from which nothing is concluded.
func CheckPublished(ctx context.Context, bucket objstore.Store, dst state.OCILayout, top v1.Descriptor) ([]string, error) {
	src := &bucketSource{bucket: bucket, dst: dst, read: map[v1.Hash]bool{}}
	g, err := Walk(ctx, src, top)
	if src.failed != nil {
		return nil, src.failed
	}
	if err != nil {
		return []string{err.Error()}, nil
	}
	var problems []string
	for _, d := range g.Blobs {
		if src.read[d.Digest] {
			continue // a manifest or index, read and verified by Walk
		}
		key, err := dst.BlobPath(d.Digest.String())
		if err != nil {
			return nil, err
		}
		info, err := bucket.Head(ctx, key)
		switch {
		case errors.Is(err, objstore.ErrNotFound):
			problems = append(problems, fmt.Sprintf("blob %s is missing", d.Digest))
		case err != nil:
			return nil, fmt.Errorf("check blob %s: %w", key, err)
		case !blobInPlace(info, d):
			problems = append(problems, fmt.Sprintf("blob %s is %d bytes, not %d, or not its content", d.Digest, info.Size, d.Size))
		}
	}
	return problems, nil
}

// blobInPlace reports whether a stored blob matches d as far as its Head
// tells: its size, and its content digest when the store knows it.
func blobInPlace(info objstore.Info, d v1.Descriptor) bool {
	return info.Size == d.Size && (info.ContentSHA256 == "" || "sha256:"+info.ContentSHA256 == d.Digest.String())
}

// bucketSource reads blobs of a bucket layout for Walk and remembers which
// it read. A failed request is kept in failed, so that it is told apart
// from a blob that is missing or damaged.
type bucketSource struct {
	bucket objstore.Store
	dst    state.OCILayout
	read   map[v1.Hash]bool
	failed error
}

func (s *bucketSource) Blob(ctx context.Context, h v1.Hash) ([]byte, error) {
	key, err := s.dst.BlobPath(h.String())
	if err != nil {
		return nil, err
	}
	s.read[h] = true
	obj, err := s.bucket.Get(ctx, key, objstore.GetOptions{})
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("blob %s is missing", h)
	}
	if err != nil {
		s.failed = fmt.Errorf("read blob %s: %w", key, err)
		return nil, s.failed
	}
	if sum := sha256.Sum256(obj.Data); h.Algorithm != "sha256" || hex.EncodeToString(sum[:]) != h.Hex {
		return nil, fmt.Errorf("blob %s does not match its digest", h)
	}
	return obj.Data, nil
}
