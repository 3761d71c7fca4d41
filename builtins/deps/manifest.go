// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"podmin.dev/podmin/internal/objstore"
)

// ManifestKey is the published dependency set, written last.
const ManifestKey = "dependencies/manifest.json"

// ManifestVersion is the manifest format version.
const ManifestVersion = 1

// Manifest is dependencies/manifest.json: the complete dependency set
// published for the cluster, with dependency names and architectures as
// map keys.
type Manifest struct {
	Version      int                      `json:"version"`
	Dependencies map[string]map[Arch]File `json:"dependencies"`
	Images       map[string]ImageEntry    `json:"images"`
}

// ImageEntry is one mirrored image. Size is the unique compressed OCI
// content bytes reachable from Digest.
type ImageEntry struct {
	Version string `json:"version"`
	Source  string `json:"source"`
	Path    string `json:"path"`
	Digest  string `json:"digest"`
	Size    int64  `json:"size"`
}

// NewManifest builds the manifest of files and images.
func NewManifest(files []File, images map[string]ImageEntry) *Manifest {
	m := &Manifest{Version: ManifestVersion, Dependencies: map[string]map[Arch]File{}, Images: map[string]ImageEntry{}}
	for _, f := range files {
		if m.Dependencies[f.Key] == nil {
			m.Dependencies[f.Key] = map[Arch]File{}
		}
		m.Dependencies[f.Key][f.Arch] = f
	}
	maps.Copy(m.Images, images)
	return m
}

// Files lists the manifest's files in canonical order (Definitions
// order, then unknown keys sorted, each by architecture), with Key and
// Arch filled in.
func (m *Manifest) Files() []File {
	var keys []string
	for _, d := range Definitions {
		if _, ok := m.Dependencies[d.Key]; ok {
			keys = append(keys, d.Key)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.Dependencies)) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	var out []File
	for _, k := range keys {
		for _, a := range slices.Sorted(maps.Keys(m.Dependencies[k])) {
			f := m.Dependencies[k][a]
			f.Key, f.Arch = k, a
			if d, ok := Lookup(k); ok {
				f.Canonical = d.Canonical
			}
			out = append(out, f)
		}
	}
	return out
}

// Lookup returns the definition of key.
func Lookup(key string) (Dependency, bool) {
	i := slices.IndexFunc(Definitions, func(d Dependency) bool { return d.Key == key })
	if i < 0 {
		return Dependency{}, false
	}
	return Definitions[i], true
}

// Encode returns the manifest's canonical bytes: two-space indented JSON
// with sorted map keys and a final newline.
func (m *Manifest) Encode() []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		panic(fmt.Sprintf("encode dependency manifest: %v", err)) // only strings, ints and maps
	}
	return buf.Bytes()
}

// ParseManifest decodes and validates manifest bytes from the bucket.
func ParseManifest(data []byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestKey, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: trailing data after the manifest", ManifestKey)
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("%s: version %d is not supported (want %d): upgrade podmin", ManifestKey, m.Version, ManifestVersion)
	}
	for key, archs := range m.Dependencies {
		for a, f := range archs {
			if a != AMD64 && a != ARM64 {
				return nil, fmt.Errorf("%s: %s: unknown architecture %q", ManifestKey, key, a)
			}
			if err := checkEntry("dependencies/"+key+"/", f.Path, f.Digest, f.Size); err != nil {
				return nil, fmt.Errorf("%s: %s %s: %w", ManifestKey, key, a, err)
			}
		}
	}
	for key, img := range m.Images {
		if err := checkEntry("mirror/", img.Path+"/", img.Digest, img.Size); err != nil {
			return nil, fmt.Errorf("%s: image %s: %w", ManifestKey, key, err)
		}
	}
	if m.Dependencies == nil {
		m.Dependencies = map[string]map[Arch]File{}
	}
	if m.Images == nil {
		m.Images = map[string]ImageEntry{}
	}
	return &m, nil
}

func checkEntry(prefix, path, digest string, size int64) error {
	rest, ok := strings.CutPrefix(path, prefix)
	if !ok || rest == "" || strings.Contains(path, "..") || strings.Contains(path, "//") {
		return fmt.Errorf("path %q is not beneath %s", path, prefix)
	}
	alg, hexd, _ := strings.Cut(digest, ":")
	if !validHex(alg, hexd) || strings.ToLower(hexd) != hexd {
		return fmt.Errorf("digest %q is not a lowercase sha256 or sha512 digest", digest)
	}
	if size <= 0 {
		return fmt.Errorf("size %d is not positive", size)
	}
	return nil
}

// ReadManifest returns the published manifest and its ETag; a missing
// manifest is (nil, "", nil).
func ReadManifest(ctx context.Context, store objstore.Store) (*Manifest, string, error) {
	obj, err := store.Get(ctx, ManifestKey, objstore.GetOptions{})
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", ManifestKey, err)
	}
	m, err := ParseManifest(obj.Data)
	if err != nil {
		return nil, "", err
	}
	return m, obj.ETag, nil
}
