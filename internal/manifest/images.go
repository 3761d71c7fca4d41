// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ClusterRegistry is the hostname of the node-local read-only registry.
// Application images live beneath ClusterRegistry/apps/; mirror/ is
// reserved for setup-managed dependency images.
const ClusterRegistry = "registry.podmin.internal"

const clusterAppsPrefix = "apps/"

// ImageRef is a syntactically valid OCI image reference split into parts.
type ImageRef struct {
	// Domain is the registry host with an optional port; empty when the
	// reference names no registry (Kubernetes then means Docker Hub).
	Domain string
	// Path is the repository path below the registry, e.g. "apps/example/web".
	Path string
	// Tag is empty when absent.
	Tag string
	// Digest is "<algorithm>:<hex>", empty when absent.
	Digest string
}

// String reassembles the reference.
func (r ImageRef) String() string {
	s := r.Path
	if r.Domain != "" {
		s = r.Domain + "/" + s
	}
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// ClusterRepository returns the repository below ClusterRegistry/apps/
// ("example/web") and true when r names a cluster application image.
func (r ImageRef) ClusterRepository() (string, bool) {
	if r.Domain != ClusterRegistry || !strings.HasPrefix(r.Path, clusterAppsPrefix) {
		return "", false
	}
	return strings.TrimPrefix(r.Path, clusterAppsPrefix), true
}

var (
	pathComponentRE   = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	domainComponentRE = regexp.MustCompile(`^(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])$`)
	portRE            = regexp.MustCompile(`^[0-9]{1,5}$`)
	ipv6HostRE        = regexp.MustCompile(`^\[[0-9a-fA-F:.]+\]$`)
	tagRE             = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	hexRE             = regexp.MustCompile(`^[a-f0-9]+$`)
	digestHexLen      = map[string]int{"sha256": 64, "sha384": 96, "sha512": 128}
)

// ParseImageRef parses an image reference with the grammar of the
// distribution project: [domain/]path[:tag][@digest]. The first path
// component is a domain when it contains "." or ":" or is "localhost".
func ParseImageRef(s string) (ImageRef, error) {
	var r ImageRef
	if s == "" {
		return r, errors.New("the reference is empty")
	}
	name := s
	if at := strings.IndexByte(name, '@'); at >= 0 {
		r.Digest = name[at+1:]
		name = name[:at]
		alg, hex, _ := strings.Cut(r.Digest, ":")
		want, ok := digestHexLen[alg]
		if !ok || len(hex) != want || !hexRE.MatchString(hex) {
			return r, fmt.Errorf("digest %q must be sha256:, sha384: or sha512: followed by its lowercase hex value", r.Digest)
		}
	}
	if colon := strings.LastIndexByte(name, ':'); colon > strings.LastIndexByte(name, '/') {
		r.Tag = name[colon+1:]
		name = name[:colon]
		if !tagRE.MatchString(r.Tag) {
			return r, fmt.Errorf("tag %q must be 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'", r.Tag)
		}
	}
	if len(name) > 255 {
		return r, fmt.Errorf("the name is %d characters; the limit is 255", len(name))
	}
	r.Path = name
	if first, rest, ok := strings.Cut(name, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		if err := checkDomain(first); err != nil {
			return r, err
		}
		r.Domain, r.Path = first, rest
	}
	for _, c := range strings.Split(r.Path, "/") {
		if !pathComponentRE.MatchString(c) {
			return r, fmt.Errorf("repository component %q must be lowercase letters and digits separated by '.', '_', '__' or '-'", c)
		}
	}
	return r, nil
}

func checkDomain(d string) error {
	host, port := d, ""
	if i := strings.LastIndexByte(d, ':'); i >= 0 && !strings.HasSuffix(d, "]") {
		host, port = d[:i], d[i+1:]
		if !portRE.MatchString(port) {
			return fmt.Errorf("registry %q has an invalid port", d)
		}
	}
	if ipv6HostRE.MatchString(host) {
		return nil
	}
	for _, c := range strings.Split(host, ".") {
		if !domainComponentRE.MatchString(c) {
			return fmt.Errorf("registry host %q is not a valid hostname", host)
		}
	}
	return nil
}

// pushHint is the guidance every cluster image problem ends with.
const pushHint = `run "podmin push <image>" and use the reference it prints`

// checkImage reports why ref cannot be used in a Pod, or "". References to
// other registries only need to be syntactically valid; cluster references
// must name an application repository beneath ClusterRegistry/apps/.
func checkImage(ref string) string {
	r, err := ParseImageRef(ref)
	if err != nil {
		return fmt.Sprintf("%q is not a valid image reference: %v", ref, err)
	}
	host, _, _ := strings.Cut(r.Domain, ":")
	if !strings.EqualFold(host, ClusterRegistry) {
		return ""
	}
	if r.Domain != ClusterRegistry {
		return fmt.Sprintf("%q is not a valid cluster image reference: the cluster registry is %s, without a port or capitals; %s", ref, ClusterRegistry, pushHint)
	}
	if repo, ok := r.ClusterRepository(); !ok || repo == "" {
		return fmt.Sprintf("%q is not a valid cluster image reference: cluster images live under %s/%s<repository>; %s", ref, ClusterRegistry, clusterAppsPrefix, pushHint)
	}
	if r.Digest != "" && !strings.HasPrefix(r.Digest, "sha256:") {
		return fmt.Sprintf("%q is not a valid cluster image reference: cluster digests are sha256; %s", ref, pushHint)
	}
	return ""
}

// ResolveImage turns an image option value into the reference written to
// a Pod. A value without a registry host is shorthand for a cluster image,
// as printed by "podmin push": "hello:v1" resolves to
// registry.podmin.internal/apps/hello:v1 and "example/web:v1" to
// registry.podmin.internal/apps/example/web:v1. Values naming a registry
// are returned unchanged once valid. Image fields inside a manifest are
// never resolved: there a reference without a host keeps its Kubernetes
// meaning (Docker Hub).
func ResolveImage(value string) (string, error) {
	r, err := ParseImageRef(value)
	if err != nil {
		return "", fmt.Errorf("%q is not a valid image reference: %w", value, err)
	}
	if r.Domain == "" {
		r.Domain, r.Path = ClusterRegistry, clusterAppsPrefix+r.Path
	}
	ref := r.String()
	if problem := checkImage(ref); problem != "" {
		return "", errors.New(problem)
	}
	return ref, nil
}
