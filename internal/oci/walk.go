// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Source reads blobs by digest. Implementations return the blob's whole
// content; Walk verifies it.
type Source interface {
	Blob(ctx context.Context, digest v1.Hash) ([]byte, error)
}

// Graph is everything an index reaches.
type Graph struct {
	// Blobs lists every blob once: layers, configs, then the manifests and
	// indexes themselves (the top one last).
	Blobs []v1.Descriptor
	// Nested lists the descriptors of the manifests and indexes below the
	// top one, as their parents give them (with platforms).
	Nested []v1.Descriptor
}

// Walk reads top and everything it references from src. Manifests and
// indexes are read and verified; other blobs are only listed.
func Walk(ctx context.Context, src Source, top v1.Descriptor) (Graph, error) {
	w := walker{src: src, seen: map[v1.Hash]bool{}}
	if err := w.manifest(ctx, top, 0); err != nil {
		return Graph{}, err
	}
	return w.g, nil
}

type walker struct {
	src  Source
	seen map[v1.Hash]bool
	g    Graph
}

// maxDepth bounds index nesting; real images nest one level.
const maxDepth = 8

func (w *walker) blob(d v1.Descriptor) {
	if !w.seen[d.Digest] {
		w.seen[d.Digest] = true
		w.g.Blobs = append(w.g.Blobs, v1.Descriptor{MediaType: d.MediaType, Size: d.Size, Digest: d.Digest})
	}
}

func (w *walker) manifest(ctx context.Context, d v1.Descriptor, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("manifest %s: indexes nest deeper than %d levels", d.Digest, maxDepth)
	}
	if w.seen[d.Digest] {
		return nil
	}
	data, err := ReadManifest(ctx, w.src, d)
	if err != nil {
		return err
	}
	switch {
	case d.MediaType.IsIndex():
		var m v1.IndexManifest
		if err := json.Unmarshal(data, &m); err != nil {
			return fmt.Errorf("index %s: %w", d.Digest, err)
		}
		for _, c := range m.Manifests {
			w.g.Nested = append(w.g.Nested, c)
			if err := w.manifest(ctx, c, depth+1); err != nil {
				return err
			}
		}
	case d.MediaType.IsImage():
		var m v1.Manifest
		if err := json.Unmarshal(data, &m); err != nil {
			return fmt.Errorf("manifest %s: %w", d.Digest, err)
		}
		w.blob(m.Config)
		for _, l := range m.Layers {
			if !l.MediaType.IsDistributable() {
				continue
			}
			w.blob(l)
		}
	default:
		return fmt.Errorf("manifest %s has media type %q, which is neither an image manifest nor an index", d.Digest, d.MediaType)
	}
	w.blob(d)
	return nil
}

// ReadManifest reads a manifest or index blob and checks its size and
// digest against d.
func ReadManifest(ctx context.Context, src Source, d v1.Descriptor) ([]byte, error) {
	if d.Size > MaxManifestSize {
		return nil, fmt.Errorf("manifest %s is %d bytes, more than the %d byte limit", d.Digest, d.Size, MaxManifestSize)
	}
	var data []byte
	var err error
	if o, ok := src.(BlobOpener); ok {
		var rc io.ReadCloser
		if rc, _, err = o.OpenBlob(ctx, d.Digest); err != nil {
			return nil, err
		}
		limit := d.Size
		if limit <= 0 {
			limit = MaxManifestSize
		}
		data, err = readLimited(rc, limit, "manifest "+d.Digest.String())
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%w: the store is corrupt; pull or build the image again", err)
		}
	} else if data, err = src.Blob(ctx, d.Digest); err != nil {
		return nil, err
	}
	if err := Verify(data, d); err != nil {
		return nil, err
	}
	return data, nil
}

// Verify checks that data has d's size and sha256 digest.
func Verify(data []byte, d v1.Descriptor) error {
	if d.Digest.Algorithm != "sha256" {
		return fmt.Errorf("blob %s: only sha256 digests are supported", d.Digest)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != d.Digest.Hex || (d.Size > 0 && int64(len(data)) != d.Size) {
		return fmt.Errorf("blob %s: content does not match its digest and size (%d bytes): the store is corrupt; pull or build the image again", d.Digest, len(data))
	}
	return nil
}
