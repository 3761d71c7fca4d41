// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package build

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"podmin.dev/podmin/internal/oci"
	"podmin.dev/podmin/internal/progress"
)

// contentSize is the number of file bytes a layer of entries holds, which
// its progress item counts.
func contentSize(entries map[string]entry) int64 {
	var n int64
	for _, e := range entries {
		n += e.size
	}
	return n
}

// gzipLevel is the compression of built layers: fast, as go-containerregistry
// compresses by default, so a layer's digest depends on its content alone.
const gzipLevel = gzip.BestSpeed

// buildLayer streams the tar of entries through gzip into the local store
// (or memory without opts.Store), hashing the tar for the layer's diff ID
// and the compressed bytes for its digest on the way.
func buildLayer(ctx context.Context, entries map[string]entry, opts Options, it progress.Item) (v1.Layer, error) {
	if opts.Store == nil {
		var buf bytes.Buffer
		h := sha256.New()
		diffID, err := compressTar(ctx, io.MultiWriter(&buf, h), entries, it)
		if err != nil {
			return nil, err
		}
		data := buf.Bytes()
		return &builtLayer{
			digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))},
			diffID: diffID, size: int64(len(data)),
			open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		}, nil
	}
	w, err := opts.Store.NewBlob(opts.Repository)
	if err != nil {
		return nil, err
	}
	diffID, err := compressTar(ctx, w, entries, it)
	if err != nil {
		w.Abort()
		return nil, err
	}
	d, err := w.Commit()
	if err != nil {
		return nil, err
	}
	src, err := opts.Store.Source(opts.Repository)
	if err != nil {
		return nil, err
	}
	blobs, ok := src.(oci.BlobOpener)
	if !ok {
		return nil, fmt.Errorf("the local store of %s does not stream blobs", opts.Repository)
	}
	return &builtLayer{digest: d.Digest, diffID: diffID, size: d.Size, open: func() (io.ReadCloser, error) {
		rc, _, err := blobs.OpenBlob(context.Background(), d.Digest)
		return rc, err
	}}, nil
}

// compressTar writes the gzip-compressed tar of entries to w and returns
// the digest of the uncompressed tar.
func compressTar(ctx context.Context, w io.Writer, entries map[string]entry, it progress.Item) (v1.Hash, error) {
	gz, err := gzip.NewWriterLevel(w, gzipLevel)
	if err != nil {
		return v1.Hash{}, err
	}
	h := sha256.New()
	if err := writeTar(ctxWriter{ctx, io.MultiWriter(gz, h)}, entries, it); err != nil {
		return v1.Hash{}, err
	}
	if err := gz.Close(); err != nil {
		return v1.Hash{}, fmt.Errorf("compress layer: %w", err)
	}
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}, nil
}

// ctxWriter stops a layer write once ctx ends.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// builtLayer is a gzip-compressed tar layer whose digests were computed
// while it was written; open reads the compressed bytes again.
type builtLayer struct {
	digest, diffID v1.Hash
	size           int64
	open           func() (io.ReadCloser, error)
}

func (l *builtLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *builtLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *builtLayer) Size() (int64, error)                { return l.size, nil }
func (l *builtLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }
func (l *builtLayer) Compressed() (io.ReadCloser, error)  { return l.open() }

// Uncompressed returns the layer's tar.
func (l *builtLayer) Uncompressed() (io.ReadCloser, error) {
	rc, err := l.open()
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(rc)
	if err != nil {
		rc.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{zr, rc}, nil
}
