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
	"hash"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"podmin.dev/podmin/internal/objstore"
)

// ErrDigestMismatch reports blob content that does not hash to the digest
// naming it, or does not have its descriptor's size.
var ErrDigestMismatch = errors.New("content does not match its digest and size")

// BlobOpener is a Source that streams: Push and ReadManifest use it instead
// of Blob when a Source has it, so no blob is held in memory whole.
type BlobOpener interface {
	// OpenBlob returns a reader of the blob's content and its size.
	OpenBlob(ctx context.Context, digest v1.Hash) (io.ReadCloser, int64, error)
}

// VerifyingReader returns a reader of r that fails with ErrDigestMismatch
// unless r yields exactly d.Size bytes hashing to d.Digest. The check is
// made when the last byte arrives and that read's bytes are held back on a
// mismatch, so a consumer that stops at d.Size bytes never receives a
// complete wrong blob. It reads at most one byte beyond d.Size.
func VerifyingReader(r io.Reader, d v1.Descriptor) io.Reader {
	return &verifyingReader{r: r, h: sha256.New(), d: d}
}

type verifyingReader struct {
	r   io.Reader
	h   hash.Hash
	d   v1.Descriptor
	n   int64
	err error
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.d.Digest.Algorithm != "sha256" {
		v.err = fmt.Errorf("blob %s: only sha256 digests are supported", v.d.Digest)
		return 0, v.err
	}
	if rem := v.d.Size - v.n; int64(len(p)) > rem+1 {
		p = p[:rem+1]
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	switch {
	case v.n > v.d.Size:
		v.err = fmt.Errorf("blob %s holds more than %d bytes: %w: pull or build the image again", v.d.Digest, v.d.Size, ErrDigestMismatch)
		return 0, v.err
	case v.n == v.d.Size && n > 0:
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.d.Digest.Hex {
			v.err = fmt.Errorf("blob %s hashes to sha256:%s: %w: pull or build the image again", v.d.Digest, got, ErrDigestMismatch)
			return 0, v.err
		}
	case v.n < v.d.Size && errors.Is(err, io.EOF):
		v.err = fmt.Errorf("blob %s ended after %d of %d bytes: %w: pull or build the image again", v.d.Digest, v.n, v.d.Size, ErrDigestMismatch)
		return 0, v.err
	}
	if err != nil && !errors.Is(err, io.EOF) {
		v.err = err
	}
	return n, err
}

// readLimited reads all of r, failing as soon as more than limit bytes
// arrive: an oversized object costs at most limit+1 bytes of memory.
func readLimited(r io.Reader, limit int64, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is more than the %d byte limit", what, limit)
	}
	return data, nil
}

// ReadObject reads a small object (index.json, a manifest) of at most
// limit bytes with its ETag. An object whose size is above the limit is
// refused before anything is read, and a read stops one byte past the
// limit, so a store that reports a wrong size costs no more.
func ReadObject(ctx context.Context, s objstore.Store, key string, limit int64) ([]byte, string, error) {
	r, err := objstore.OpenObject(ctx, s, key, objstore.GetOptions{})
	if err != nil {
		return nil, "", err
	}
	defer r.Close()
	if r.Info.Size > limit {
		return nil, "", fmt.Errorf("%s is %d bytes, more than the %d byte limit", key, r.Info.Size, limit)
	}
	data, err := readLimited(r, limit, key)
	if err != nil {
		return nil, "", err
	}
	return data, r.Info.ETag, nil
}
