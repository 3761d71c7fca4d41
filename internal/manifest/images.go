// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"podmin.dev/podmin/internal/scrub"
)

// ClusterRegistry is the hostname of the node-local read-only registry, the
// only registry nodes pull from: they have no IPv4 and their registry
// serves only apps/ and mirror/ from the cluster bucket.
const ClusterRegistry = "registry.podmin.internal"

const (
	clusterAppsPrefix   = "apps/"
	clusterMirrorPrefix = "mirror/"
)

// PlatformImage is an upstream image that Podmin itself mirrors beneath
// mirror/ (setup publishes it, or a managed component's install command
// mirrors it). Manifests may reference exactly these mirror/ repositories;
// every other image is pushed by its user beneath apps/.
type PlatformImage struct {
	// Name is how Podmin refers to the image.
	Name string
	// Source is the upstream repository, without tag or digest.
	Source string
}

// Repository is the image's repository in the cluster registry,
// registry.podmin.internal/mirror/<upstream-registry>/<repository>.
func (p PlatformImage) Repository() string {
	return ClusterRegistry + "/" + clusterMirrorPrefix + p.Source
}

// PlatformImages lists the images the platform manages: the kubelet's pause
// image, which setup publishes for every architecture, and the cloudflared
// image that "podmin install cloudflared" mirrors. This is the one list of
// mirror/ repositories a Pod may use.
func PlatformImages() []PlatformImage {
	return []PlatformImage{
		{Name: "pause", Source: "registry.k8s.io/pause"},
		{Name: "cloudflared", Source: "docker.io/cloudflare/cloudflared"},
	}
}

// ImageRef is a syntactically valid OCI image reference split into parts
// exactly as written.
type ImageRef struct {
	// Domain is the registry host with an optional port; empty when the
	// reference names no registry (cluster shorthand in Podmin).
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

// errPodminRule marks references that go-containerregistry accepts but
// Podmin refuses because containerd, which pulls them on the node, follows
// the stricter grammar of the distribution project.
var errPodminRule = errors.New("podmin image reference rule")

type ruleError struct{ msg string }

func (e *ruleError) Error() string { return e.msg }
func (e *ruleError) Unwrap() error { return errPodminRule }

func ruleErrorf(format string, args ...any) error {
	return &ruleError{msg: fmt.Sprintf(format, args...)}
}

var (
	// pathComponentRE is the distribution grammar of one repository path
	// component; go-containerregistry accepts any of [a-z0-9._-] in any order.
	pathComponentRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	// tagStartRE: a tag starts with a word character, not '.' or '-'.
	tagStartRE = regexp.MustCompile(`^[A-Za-z0-9_]`)
)

// maxNameLength bounds registry and repository together, as distribution does.
const maxNameLength = 255

// ParseImageRef parses an image reference with go-containerregistry's name
// package: [registry/]repository[:tag][@digest], where the first path
// component is the registry when it contains '.' or ':' or is "localhost".
// On top of that grammar Podmin applies the distribution project's rules
// that containerd enforces when it pulls: repository components are
// lowercase letters and digits separated by '.', '_', '__' or dashes; a
// tag does not start with '.' or '-'; registry and repository together
// are at most 255 characters.
func ParseImageRef(s string) (ImageRef, error) {
	if s == "" {
		return ImageRef{}, errors.New("the reference is empty")
	}
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		return ImageRef{}, errors.New("a reference has no URL scheme: remove http:// or https://")
	}
	// Podmin's rules run first where they apply to the parts as written:
	// they explain more precisely than the name package what to change.
	r := splitRef(s)
	if !strings.Contains(r.Digest, "@") {
		for c := range strings.SplitSeq(r.Path, "/") {
			if !pathComponentRE.MatchString(c) {
				return ImageRef{}, ruleErrorf("repository component %s must be lowercase letters and digits separated by '.', '_', '__' or '-'", scrub.QuotePart(s, c))
			}
		}
		if r.Tag != "" && !tagStartRE.MatchString(r.Tag) {
			return ImageRef{}, ruleErrorf("tag %s must start with a letter, a digit or '_'", scrub.QuotePart(s, r.Tag))
		}
	}
	opts := []name.Option{name.WithDefaultRegistry(""), name.WithDefaultTag("")}
	if _, err := name.ParseReference(s, opts...); err != nil {
		return ImageRef{}, ggcrProblem(s, opts)
	}
	if n := len(r.Domain) + len(r.Path); n > maxNameLength {
		return ImageRef{}, ruleErrorf("registry and repository are %d characters; the limit is %d", n, maxNameLength)
	}
	return r, nil
}

// ggcrProblem explains why go-containerregistry refused s. ParseReference
// only says that it could not parse s; the constructor for the form of s
// (tag or digest) says why.
func ggcrProblem(s string, opts []name.Option) error {
	var err error
	if strings.Contains(s, "@") {
		_, err = name.NewDigest(s, opts...)
	} else {
		_, err = name.NewTag(s, opts...)
	}
	if err == nil {
		err = errors.New("could not parse the reference")
	}
	// The name package's messages hold parts of s as they are.
	msg := err.Error()
	if !scrub.Showable(s) {
		msg = "the name package could not parse it"
	}
	return fmt.Errorf("%s; write [registry/]repository[:tag][@sha256:<hex>], e.g. hello:v1", msg)
}

// splitRef splits s into parts with name.ParseReference's rules, keeping
// every part as written. The parts are meaningful only when ParseReference
// accepts s; before that they only serve to explain a problem.
func splitRef(s string) ImageRef {
	var r ImageRef
	rest := s
	if at := strings.IndexByte(rest, '@'); at >= 0 {
		rest, r.Digest = rest[:at], rest[at+1:]
	}
	if colon := strings.LastIndexByte(rest, ':'); colon >= 0 && !strings.Contains(rest[colon+1:], "/") {
		rest, r.Tag = rest[:colon], rest[colon+1:]
	}
	r.Path = rest
	if first, path, ok := strings.Cut(rest, "/"); ok && (first == "localhost" || strings.ContainsAny(first, ".:")) {
		r.Domain, r.Path = first, path
	}
	return r
}

// ResolveImage turns an image as written in a manifest or given as an image
// option into the reference a Pod carries. Shorthand without a registry
// ("hello", "hello:v1", "team/web:v2") resolves beneath
// registry.podmin.internal/apps/, as "podmin push" prints it. Cluster
// references must name apps/<repository>, or a mirror/ repository of
// PlatformImages. Every other registry is an error whose text holds the
// "podmin push" command that copies the image into the cluster registry.
func ResolveImage(value string) (string, error) {
	r, err := ParseImageRef(value)
	if err != nil {
		return "", fmt.Errorf("%s is not a valid image reference: %w", scrub.Quote(value), err)
	}
	if r.Domain == "" {
		r.Domain, r.Path = ClusterRegistry, clusterAppsPrefix+r.Path
		if n := len(r.Domain) + len(r.Path); n > maxNameLength {
			return "", fmt.Errorf("%s is too long: as a cluster reference it has %d characters; the limit is %d", scrub.Quote(value), n, maxNameLength)
		}
	}
	if !strings.EqualFold(hostOf(r.Domain), ClusterRegistry) {
		return "", fmt.Errorf("%s is not in the cluster registry, the only one nodes pull from: %s", scrub.Quote(value), pushAdvice(value, r))
	}
	if r.Domain != ClusterRegistry {
		return "", fmt.Errorf("%s names the cluster registry as %s: write it exactly %s, without a port or capitals", scrub.Quote(value), scrub.QuotePart(value, r.Domain), ClusterRegistry)
	}
	if r.Digest != "" && !strings.HasPrefix(r.Digest, "sha256:") {
		return "", fmt.Errorf("%s is not a valid cluster image reference: cluster images are addressed by sha256 digests; use the digest \"podmin push\" prints", scrub.Quote(value))
	}
	switch {
	case strings.HasPrefix(r.Path, clusterAppsPrefix):
		return r.String(), nil
	case strings.HasPrefix(r.Path, clusterMirrorPrefix):
		repo := ClusterRegistry + "/" + r.Path
		if slices.ContainsFunc(PlatformImages(), func(p PlatformImage) bool { return p.Repository() == repo }) {
			return r.String(), nil
		}
		source := ImageRef{Path: strings.TrimPrefix(r.Path, clusterMirrorPrefix), Tag: r.Tag, Digest: r.Digest}.String()
		return "", fmt.Errorf("%s is not a platform image: mirror/ holds only the images Podmin manages (%s); %s",
			scrub.Quote(value), platformNames(), pushAdvice(source, splitRef(source)))
	default:
		short := ImageRef{Path: r.Path, Tag: r.Tag, Digest: r.Digest}
		full := ClusterRegistry + "/" + clusterAppsPrefix + short.String()
		return "", fmt.Errorf("%s is not a cluster image: cluster images live under %s/%s<repository>; write %s or the shorthand %s",
			scrub.Quote(value), ClusterRegistry, clusterAppsPrefix, scrub.QuotePart(value, full), scrub.QuotePart(value, short.String()))
	}
}

// hostOf drops the port of a registry domain.
func hostOf(domain string) string {
	if strings.HasPrefix(domain, "[") {
		if end := strings.IndexByte(domain, ']'); end >= 0 {
			return domain[:end+1]
		}
	}
	host, _, _ := strings.Cut(domain, ":")
	return host
}

// pushAdvice is the command that copies source into the cluster registry
// and the reference it then prints: push keeps the repository and tag
// beneath apps/ and replaces the registry host.
func pushAdvice(source string, r ImageRef) string {
	// The command quotes source whole, so only a source the scrubber's
	// quoting would show whole is spelled out.
	if !scrub.Showable(source) {
		return `copy it with "podmin push SOURCE" and use the reference it prints`
	}
	advice := fmt.Sprintf("run %q", "podmin push "+shellWord(source))
	if r.Digest != "" {
		return advice + " and use the reference it prints"
	}
	tag := r.Tag
	if tag == "" {
		tag = "latest"
	}
	return advice + fmt.Sprintf(", then use the reference it prints, %s/%s%s:%s", ClusterRegistry, clusterAppsPrefix, r.Path, tag)
}

// shellWord quotes s for a POSIX shell when it holds more than the
// characters of a plain reference (an IPv6 registry's brackets would glob).
func shellWord(s string) string {
	if strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func platformNames() string {
	var names []string
	for _, p := range PlatformImages() {
		names = append(names, p.Source)
	}
	return strings.Join(names, ", ")
}
