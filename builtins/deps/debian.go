// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// debian resolves a package from a Debian repository's Packages index:
// the greatest stable upstream version of the pin, with the strongest
// digest field the index carries (a present SHA512 is required).
func (r *Resolver) debian(ctx context.Context, dep Dependency, archs []Arch) ([]File, error) {
	var files []File
	for _, a := range archs {
		name, ok := dep.ArchNames[a]
		if !ok {
			return nil, fmt.Errorf("%s: no build for architecture %s", dep.Key, a)
		}
		x := expander{arch: name, podarch: string(a)}
		url := r.host(dep.Source.Host) + x.expand(dep.Source.Path)
		body, err := r.get(ctx, url, 256<<20)
		if err != nil {
			return nil, fmt.Errorf("%s: read the package index: %w", dep.Key, err)
		}
		if strings.HasSuffix(url, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", dep.Key, url, err)
			}
			if body, err = io.ReadAll(io.LimitReader(zr, 1<<30)); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", dep.Key, url, err)
			}
		}
		var best map[string]string
		for _, st := range stanzas(body) {
			if st["Package"] != dep.Source.Repo || (st["Architecture"] != name && st["Architecture"] != "all") {
				continue
			}
			v := "v" + upstreamVersion(st["Version"])
			if !MatchesPin(v, dep.Pin) {
				continue
			}
			// Debian's own order: 17.6-10 follows 17.6-9.
			if best == nil || CompareDebian(st["Version"], best["Version"]) > 0 {
				best = st
			}
		}
		if best == nil {
			return nil, fmt.Errorf("%s: %s lists no stable %s for %s: %w", dep.Key, url, dep.Source.Repo, name, ErrNoRelease)
		}
		version := best["Version"]
		if _, after, ok := strings.Cut(version, ":"); ok {
			version = after // the epoch orders versions but names no file
		}
		x.version = version
		size, err := strconv.ParseInt(best["Size"], 10, 64)
		if err != nil || size <= 0 || best["Filename"] == "" || strings.Contains(best["Filename"], "..") {
			return nil, fmt.Errorf("%s %s: malformed index entry in %s", dep.Key, version, url)
		}
		f := File{Key: dep.Key, Arch: a, Canonical: dep.Canonical, Version: version,
			URL:  r.host(dep.Source.Host) + dep.Source.Pool + best["Filename"],
			Path: "dependencies/" + dep.Key + "/" + x.expand(dep.Object), Size: size}
		for _, alg := range []string{"sha512", "sha256"} {
			field, ok := dep.Digest.Sidecars[alg]
			if !ok || best[field] == "" {
				continue
			}
			if !validHex(alg, best[field]) {
				return nil, fmt.Errorf("%s %s: %s %q is not a %s digest", dep.Key, version, field, best[field], alg)
			}
			f.Digest = alg + ":" + strings.ToLower(best[field])
			break
		}
		if f.Digest == "" {
			return nil, fmt.Errorf("%s %s: %w", dep.Key, version, ErrNoDigest)
		}
		files = append(files, f)
	}
	return files, nil
}

// stanzas splits a Packages index into field maps (continuation lines
// are dropped: none of the fields read here have them).
func stanzas(data []byte) []map[string]string {
	var out []map[string]string
	cur := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if len(cur) > 0 {
				out = append(out, cur)
				cur = map[string]string{}
			}
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			cur[k] = strings.TrimSpace(v)
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// upstreamVersion strips a Debian version's epoch and revision, and
// marks "~" (sorts before the release) as a prerelease.
func upstreamVersion(v string) string {
	if _, after, ok := strings.Cut(v, ":"); ok {
		v = after
	}
	if i := strings.LastIndex(v, "-"); i > 0 {
		v = v[:i]
	}
	return strings.Replace(v, "~", "-", 1)
}

var kernelPackage = regexp.MustCompile(`^linux-image-([0-9][A-Za-z0-9.+_-]*)$`)

// ImageKernel reads Debian's immutable versioned image manifest (the JSON
// published beside each cloud image build) and returns the image's exact
// initial kernel: the one linux-image-<release> package it lists.
func (r *Resolver) ImageKernel(ctx context.Context, url string) (string, error) {
	body, err := r.get(ctx, url, 64<<20)
	if err != nil {
		return "", fmt.Errorf("read the image manifest: %w", err)
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("image manifest %s: %w", url, err)
	}
	kernels := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		case string:
			if m := kernelPackage.FindStringSubmatch(v); m != nil {
				kernels[m[1]] = true
			}
		}
	}
	walk(doc)
	if len(kernels) != 1 {
		return "", fmt.Errorf("image manifest %s lists %d kernel packages, want exactly one", url, len(kernels))
	}
	for k := range kernels {
		return k, nil
	}
	return "", nil
}
