// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"encoding/json"
	"fmt"
	"maps"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// RefNameAnnotation holds a descriptor's bare tag ("v1") in index.json.
	RefNameAnnotation = "org.opencontainers.image.ref.name"
	// LayoutFileContent is the content of every oci-layout file.
	LayoutFileContent = `{"imageLayoutVersion":"1.0.0"}`
	// MaxIndexSize bounds an index.json Podmin reads or writes. A layout
	// holding that many descriptors is not an image repository any more.
	MaxIndexSize = 4 << 20
	// MaxManifestSize bounds one manifest or index blob.
	MaxManifestSize = 4 << 20
)

// EmptyIndex returns an OCI image index without descriptors.
func EmptyIndex() *v1.IndexManifest {
	return &v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{}}
}

// ParseIndex decodes an index.json. Empty data is an empty index.
func ParseIndex(data []byte) (*v1.IndexManifest, error) {
	if len(data) > MaxIndexSize {
		return nil, fmt.Errorf("index.json is %d bytes, more than the %d byte limit: remove unused tags from the repository", len(data), MaxIndexSize)
	}
	if len(data) == 0 {
		return EmptyIndex(), nil
	}
	var m v1.IndexManifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("index.json is not an OCI image index: %w", err)
	}
	if m.SchemaVersion != 2 {
		return nil, fmt.Errorf("index.json has schemaVersion %d, want 2", m.SchemaVersion)
	}
	if m.Manifests == nil {
		m.Manifests = []v1.Descriptor{}
	}
	return &m, nil
}

// EncodeIndex encodes an index.json deterministically.
func EncodeIndex(m *v1.IndexManifest) ([]byte, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode index.json: %w", err)
	}
	if len(data) > MaxIndexSize {
		return nil, fmt.Errorf("index.json would be %d bytes, more than the %d byte limit: remove unused tags from the repository", len(data), MaxIndexSize)
	}
	return data, nil
}

// FindTag returns the first descriptor tagged tag.
func FindTag(m *v1.IndexManifest, tag string) (v1.Descriptor, bool) {
	for _, d := range m.Manifests {
		if d.Annotations[RefNameAnnotation] == tag {
			return d, true
		}
	}
	return v1.Descriptor{}, false
}

// FindDigest returns the first descriptor with digest h.
func FindDigest(m *v1.IndexManifest, h v1.Hash) (v1.Descriptor, bool) {
	for _, d := range m.Manifests {
		if d.Digest == h {
			return d, true
		}
	}
	return v1.Descriptor{}, false
}

// MergeTag returns a copy of m in which tag names top and every descriptor
// of nested is listed, so a reader resolves digests without walking
// indexes. The tag's previous descriptor is replaced in place; other
// descriptors are kept in their order; new ones are appended in the order
// given, so merging the same image twice changes nothing.
func MergeTag(m *v1.IndexManifest, tag string, top v1.Descriptor, nested []v1.Descriptor) *v1.IndexManifest {
	tagged := top
	tagged.Annotations = maps.Clone(top.Annotations)
	if tagged.Annotations == nil {
		tagged.Annotations = map[string]string{}
	}
	tagged.Annotations[RefNameAnnotation] = tag
	out := *m
	out.Manifests = make([]v1.Descriptor, 0, len(m.Manifests)+1+len(nested))
	untagged := map[v1.Hash]bool{}
	placed := false
	for _, d := range m.Manifests {
		if d.Annotations[RefNameAnnotation] == tag {
			if !placed {
				out.Manifests = append(out.Manifests, tagged)
				placed = true
			}
			continue
		}
		if _, ok := d.Annotations[RefNameAnnotation]; !ok {
			untagged[d.Digest] = true
		}
		out.Manifests = append(out.Manifests, d)
	}
	if !placed {
		out.Manifests = append(out.Manifests, tagged)
	}
	for _, d := range nested {
		if untagged[d.Digest] {
			continue
		}
		untagged[d.Digest] = true
		d.Annotations = maps.Clone(d.Annotations)
		delete(d.Annotations, RefNameAnnotation)
		if len(d.Annotations) == 0 {
			d.Annotations = nil
		}
		out.Manifests = append(out.Manifests, d)
	}
	return &out
}
