// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"bytes"
	"context"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"

	"podmin.dev/podmin/internal/progress"
)

// Write stores idx and everything it references in repo and tags it with
// each of tags. Blobs already present are not written again. It returns
// the index's descriptor as the tags now name it (without annotations).
func (s *Store) Write(ctx context.Context, repo string, idx v1.ImageIndex, tags ...string) (v1.Descriptor, error) {
	dir, err := s.Dir(repo)
	if err != nil {
		return v1.Descriptor{}, err
	}
	t := progress.Or(s.sink).Begin(s.title, 0)
	err = writeIndex(ctx, dir, idx, 0, t)
	t.End(err)
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("store %s in the local image store: %w", repo, err)
	}
	d, err := partial.Descriptor(idx)
	if err != nil {
		return v1.Descriptor{}, err
	}
	top := v1.Descriptor{MediaType: d.MediaType, Size: d.Size, Digest: d.Digest}
	if err := s.Tag(repo, top, tags...); err != nil {
		return v1.Descriptor{}, err
	}
	return top, nil
}

func writeIndex(ctx context.Context, dir string, idx v1.ImageIndex, depth int, t progress.Transfer) error {
	if depth > maxDepth {
		return fmt.Errorf("indexes nest deeper than %d levels", maxDepth)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range m.Manifests {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch {
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return fmt.Errorf("index %s: %w", d.Digest, err)
			}
			if err := writeIndex(ctx, dir, child, depth+1, t); err != nil {
				return err
			}
		case d.MediaType.IsImage():
			img, err := idx.Image(d.Digest)
			if err != nil {
				return fmt.Errorf("image %s: %w", d.Digest, err)
			}
			if err := writeImage(ctx, dir, img, t); err != nil {
				return fmt.Errorf("image %s: %w", d.Digest, err)
			}
		default:
			return fmt.Errorf("descriptor %s has media type %q, which is neither an image nor an index", d.Digest, d.MediaType)
		}
	}
	return writeRaw(dir, idx)
}

// rawManifest is what images and indexes have in common.
type rawManifest interface {
	RawManifest() ([]byte, error)
	Digest() (v1.Hash, error)
}

func writeRaw(dir string, m rawManifest) error {
	raw, err := m.RawManifest()
	if err != nil {
		return err
	}
	h, err := m.Digest()
	if err != nil {
		return err
	}
	return writeBlob(dir, h, bytes.NewReader(raw))
}

func writeImage(ctx context.Context, dir string, img v1.Image, t progress.Transfer) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		mt, err := l.MediaType()
		if err != nil {
			return err
		}
		if !mt.IsDistributable() {
			continue
		}
		h, err := l.Digest()
		if err != nil {
			return err
		}
		if p, _ := blobFile(dir, h); exists(p) {
			continue
		}
		size, err := l.Size()
		if err != nil {
			return fmt.Errorf("layer %s: %w", h, err)
		}
		rc, err := l.Compressed()
		if err != nil {
			return fmt.Errorf("layer %s: %w", h, err)
		}
		it := t.Item(progress.ShortName(h.String()), size)
		err = writeBlob(dir, h, progress.Reader(it, rc))
		it.Done()
		rc.Close()
		if err != nil {
			return err
		}
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	ch, err := img.ConfigName()
	if err != nil {
		return err
	}
	if err := writeBlob(dir, ch, bytes.NewReader(cfg)); err != nil {
		return err
	}
	return writeRaw(dir, img)
}
