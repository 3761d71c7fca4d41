// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry

import (
	"net/http"
	"strings"

	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/state"
)

// kind is what a request asks for.
type kind int

const (
	kindBase kind = iota + 1
	kindManifest
	kindBlob
)

// route is a validated request: nothing in it can name an object outside
// its layout.
type route struct {
	kind   kind
	layout state.OCILayout
	name   string
	// tag or digest ("sha256:<hex>"), exactly one set for manifests;
	// digest for blobs.
	tag, digest string
}

// maxPath bounds the request path; names are at most 255 characters.
const maxPath = 1024

// parseRoute validates method and path before anything is read.
func parseRoute(r *http.Request) (route, *apiError) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return route{}, errorf(http.StatusMethodNotAllowed, CodeUnsupported, "this registry is read-only: only GET and HEAD are served")
	}
	p := r.URL.EscapedPath()
	if p == "/v2/" || p == "/v2" {
		return route{kind: kindBase}, nil
	}
	rest, ok := strings.CutPrefix(p, "/v2/")
	if !ok || len(p) > maxPath {
		return route{}, errorf(http.StatusNotFound, CodeUnsupported, "not found: only /v2/ pull requests are served")
	}
	if strings.ContainsAny(rest, "%\\") {
		return route{}, errorf(http.StatusBadRequest, CodeNameInvalid, "escaped characters are not valid in repository names, tags or digests")
	}
	var rt route
	var ref string
	if name, ref0, ok := cutLast(rest, "/manifests/"); ok {
		rt.kind, rt.name, ref = kindManifest, name, ref0
	} else if name, ref0, ok := cutLast(rest, "/blobs/"); ok {
		rt.kind, rt.name, ref = kindBlob, name, ref0
	} else {
		return route{}, errorf(http.StatusNotFound, CodeUnsupported, "not found: only manifest and blob pulls are served, no listing, tags or discovery")
	}
	l, aerr := layoutOf(rt.name)
	if aerr != nil {
		return route{}, aerr
	}
	rt.layout = l
	switch {
	case strings.Contains(ref, ":"):
		if _, err := l.BlobPath(ref); err != nil {
			return route{}, errorf(http.StatusBadRequest, CodeDigestInvalid, "digest "+quote(ref)+" must be sha256:<64 lowercase hex characters>")
		}
		rt.digest = ref
	case rt.kind == kindBlob:
		return route{}, errorf(http.StatusBadRequest, CodeDigestInvalid, "blob reference "+quote(ref)+" must be a sha256 digest")
	default:
		if ir, err := manifest.ParseImageRef("x:" + ref); err != nil || ir.Tag != ref || ir.Digest != "" {
			return route{}, errorf(http.StatusNotFound, CodeManifestUnknown, "tag "+quote(ref)+" is not a valid tag")
		}
		rt.tag = ref
	}
	return rt, nil
}

// layoutOf maps apps/<repository> and mirror/<upstream>/<repository> to
// their bucket layouts with the reference and layout rules.
func layoutOf(name string) (state.OCILayout, *apiError) {
	invalid := func(err error) *apiError {
		return errorf(http.StatusBadRequest, CodeNameInvalid, "repository "+quote(name)+" is invalid: "+err.Error())
	}
	if repo, ok := strings.CutPrefix(name, state.AppsPrefix); ok {
		if _, err := manifest.ParseImageRef(manifest.ClusterRegistry + "/" + name); err != nil {
			return state.OCILayout{}, invalid(err)
		}
		l, err := state.AppLayout(repo)
		if err != nil {
			return state.OCILayout{}, invalid(err)
		}
		return l, nil
	}
	if rest, ok := strings.CutPrefix(name, state.MirrorPrefix); ok {
		upstream, repo, _ := strings.Cut(rest, "/")
		l, err := state.MirrorLayout(upstream, repo)
		if err != nil {
			return state.OCILayout{}, invalid(err)
		}
		return l, nil
	}
	return state.OCILayout{}, errorf(http.StatusNotFound, CodeNameUnknown, "repository "+quote(name)+" does not exist: only apps/<repository> and mirror/<registry>/<repository> are served")
}

// cutLast splits s around the last sep whose tail has no slash.
func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i <= 0 {
		return "", "", false
	}
	after = s[i+len(sep):]
	if after == "" || strings.Contains(after, "/") {
		return "", "", false
	}
	return s[:i], after, true
}

// quote quotes user input for a message, bounded in length.
func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}
