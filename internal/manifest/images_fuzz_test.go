// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
)

// FuzzImageRef compares ParseImageRef with go-containerregistry's
// name.ParseReference: what go-containerregistry rejects, Podmin rejects;
// what Podmin accepts, go-containerregistry accepts with the same parts;
// and what only Podmin rejects is rejected by one of its documented
// stricter rules. Accepted references round-trip and resolve consistently.
func FuzzImageRef(f *testing.F) {
	for _, s := range []string{
		"hello", "hello:v1", "team/web:v2", "hello@" + sha256Dig, "hello:v1@" + sha256Dig,
		"registry.podmin.internal/apps/hello:v1", "registry.podmin.internal/mirror/registry.k8s.io/pause:3.10.2",
		"docker.io/nginx", "docker.io/library/nginx:1.27", "localhost:5000/app", "localhost:5000",
		"[fd00::1]:5000/app:v1", "Hello", "a//b", "hello:-v1", "a@b@c", "https://ghcr.io/x", "a:b:c",
		"ghcr.io/org/app@sha512:" + strings.Repeat("ab", 64), "UPPER.example/x", "x/.y", "__x", "a.b:1/c:d",
	} {
		f.Add(s)
	}
	opts := []name.Option{name.WithDefaultRegistry(""), name.WithDefaultTag("")}
	f.Fuzz(func(t *testing.T, s string) {
		ours, err := ParseImageRef(s)
		theirs, theirErr := name.ParseReference(s, opts...)
		switch {
		case theirErr != nil && err == nil:
			t.Fatalf("ParseImageRef(%q) = %+v, but go-containerregistry rejects it: %v", s, ours, theirErr)
		case theirErr == nil && err != nil:
			if !errors.Is(err, errPodminRule) {
				t.Fatalf("ParseImageRef(%q) rejects a reference go-containerregistry accepts, and not by a Podmin rule: %v", s, err)
			}
			return
		case err != nil:
			return
		}

		if got := ours.String(); got != s {
			t.Fatalf("ParseImageRef(%q).String() = %q", s, got)
		}
		wantDomain := ours.Domain
		if wantDomain == "docker.io" {
			wantDomain = name.DefaultRegistry
		}
		repo := theirs.Context()
		if repo.RegistryStr() != wantDomain {
			t.Fatalf("%q: registry %q, go-containerregistry %q", s, ours.Domain, repo.RegistryStr())
		}
		wantPath := ours.Path
		if wantDomain == name.DefaultRegistry && !strings.Contains(wantPath, "/") {
			wantPath = "library/" + wantPath
		}
		if repo.RepositoryStr() != wantPath {
			t.Fatalf("%q: repository %q, go-containerregistry %q", s, ours.Path, repo.RepositoryStr())
		}
		switch r := theirs.(type) {
		case name.Tag:
			if ours.Digest != "" || r.TagStr() != ours.Tag {
				t.Fatalf("%q: tag %q digest %q, go-containerregistry tag %q", s, ours.Tag, ours.Digest, r.TagStr())
			}
		case name.Digest:
			if r.DigestStr() != ours.Digest {
				t.Fatalf("%q: digest %q, go-containerregistry %q", s, ours.Digest, r.DigestStr())
			}
		}

		resolved, err := ResolveImage(s)
		if err != nil {
			if ours.Domain == "" && !strings.Contains(err.Error(), "sha256") && !strings.Contains(err.Error(), "characters; the limit is") {
				t.Fatalf("shorthand %q does not resolve: %v", s, err)
			}
			return
		}
		r, err := ParseImageRef(resolved)
		if err != nil || r.Domain != ClusterRegistry {
			t.Fatalf("ResolveImage(%q) = %q, which parses as %+v, %v", s, resolved, r, err)
		}
		if again, err := ResolveImage(resolved); err != nil || again != resolved {
			t.Fatalf("ResolveImage(%q) = %q, %v; want it unchanged", resolved, again, err)
		}
	})
}
