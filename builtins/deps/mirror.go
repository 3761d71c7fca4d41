// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// MirrorEnv is the setting that points every dependency fetch of setup and
// "podmin fetch" at a local directory or an http(s) URL instead of the
// upstream publishers, so a machine without internet access can stage the
// agent and its dependencies. Below it the resolver reads:
//
//	podmin/v<version>/                     a Podmin release as make release builds it
//	api/repos/<owner>/<name>/releases      GitHub's releases listing of a project
//	k8s/ gvisor/ fluentbit/ debian/        dl.k8s.io, storage.googleapis.com/gvisor,
//	                                       packages.fluentbit.io, deb.debian.org
//
// A directory serves each URL's path as a file (a query is ignored), so a
// releases listing is one file holding all of a project's releases. The
// assets a listing names are fetched from the URLs it gives. Every digest
// is still checked against what the mirror publishes beside the file,
// exactly as upstream.
const MirrorEnv = "PODMIN_DEPENDENCY_MIRROR"

// DefaultPodminReleases is where GitHub serves the files of Podmin's
// releases: <base>/v<version>/<asset>.
const DefaultPodminReleases = "https://github.com/podplane/podmin/releases/download"

// mirrorHosts are the folders of a mirror holding each download host.
var mirrorHosts = map[DownloadHost]string{
	KubernetesHost: "k8s",
	GVisorHost:     "gvisor",
	FluentBitHost:  "fluentbit",
	DebianHost:     "debian",
}

// MirrorFromEnv returns the mirror MirrorEnv names as a base URL (a
// directory becomes a file:// URL), or "" when it is unset.
func MirrorFromEnv() (string, error) {
	return ParseMirror(os.Getenv(MirrorEnv))
}

// ParseMirror turns a directory or an http(s) URL into the mirror's base
// URL; "" stays "".
func ParseMirror(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		if _, err := url.Parse(s); err != nil {
			return "", fmt.Errorf("%s=%q is not a URL (%v): set it to a directory or an http(s) URL", MirrorEnv, s, err)
		}
		return strings.TrimSuffix(s, "/"), nil
	}
	dir := strings.TrimPrefix(s, "file://")
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("%s=%q: %w", MirrorEnv, s, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s=%q is neither an http(s) URL nor a directory: set it to the folder holding podmin/, api/, k8s/... or unset it to fetch from the publishers", MirrorEnv, s)
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), nil
}

// withFiles returns a client that also reads file:// URLs, the URLs of a
// mirror directory; c's own requests are unchanged.
func withFiles(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	out := *c
	out.Transport = fileTransport{next: c.Transport}
	return &out
}

type fileTransport struct{ next http.RoundTripper }

// files serves file:// URLs; paths are absolute, so the root is "/".
var files = http.NewFileTransport(http.Dir("/"))

func (t fileTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "file" {
		return files.RoundTrip(req)
	}
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(req)
}

// mirroredRelease is the release of version in a mirror, laid out as
// make release builds it: <mirror>/podmin/v<version>/<asset>, the checksum
// file beside the assets. Nothing is listed: a missing file fails its
// download, and every asset is checked against the checksum file.
func (r *Resolver) mirroredRelease(dep Dependency, version string) ghRelease {
	base := r.Mirror + "/podmin/" + dep.Source.TagPrefix + version + "/"
	rel := ghRelease{TagName: dep.Source.TagPrefix + version}
	names := []string{dep.Digest.Checksums}
	for _, a := range Archs {
		if name, ok := dep.ArchNames[a]; ok {
			names = append(names, expander{version: version, arch: name, podarch: string(a)}.expand(dep.Asset))
		}
	}
	for _, n := range names {
		rel.Assets = append(rel.Assets, ghAsset{Name: n, URL: base + n})
	}
	return rel
}
