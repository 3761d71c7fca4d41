// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package depstest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins/deps"
	"podmin.dev/podmin/builtins/deps/internal/upstreamtest"
	"podmin.dev/podmin/internal/objstore"
)

// Resolver returns a resolver asking u for every release, for agent
// version 1.4.0.
func (u *Upstream) Resolver() *deps.Resolver {
	return &deps.Resolver{Client: u.Server.Client(), GitHubAPI: u.Server.URL + "/api", AgentVersion: "1.4.0",
		Hosts: map[deps.DownloadHost]string{deps.KubernetesHost: u.Server.URL + "/k8s", deps.GVisorHost: u.Server.URL + "/gvisor",
			deps.FluentBitHost: u.Server.URL + "/fluentbit", deps.DebianHost: u.Server.URL + "/debian"}}
}

// ImageManifestURL maps an official Debian AMI name to u's copy of the
// recorded image manifest (kernel 6.12.41+deb13-cloud-amd64).
func (u *Upstream) ImageManifestURL(name string) (string, error) {
	if !strings.HasPrefix(name, "debian-13-") {
		return "", fmt.Errorf("AMI %q is not an official Debian 13 image", name)
	}
	return u.Server.URL + "/images/" + name + ".json", nil
}

// Upstream serves the release listings recorded in deps/testdata and
// synthetic release files whose published digests are computed from their
// bodies, so every digest the resolver sees is genuine. It counts the
// release files downloaded (Downloaded).
type Upstream struct {
	*upstreamtest.Upstream
}

// NewUpstream starts the server; it stops when the test ends.
func NewUpstream(t testing.TB) *Upstream {
	return &Upstream{upstreamtest.New(t)}
}

// Body is the content served for a release file path or name.
func Body(name string) []byte { return upstreamtest.Body(name) }

// Digest is the hex sha256 or sha512 digest of b.
func Digest(alg string, b []byte) string { return upstreamtest.Digest(alg, b) }

// MirrorImage records the mirrored images in the bucket without a
// registry; CheckImage finds them again there.
func MirrorImage(ctx context.Context, store objstore.Store, img deps.Image) (deps.ImageEntry, error) {
	body := []byte(`{"schemaVersion":2}`)
	if _, err := store.Put(ctx, img.Path()+"/index.json", body); err != nil {
		return deps.ImageEntry{}, err
	}
	return deps.ImageEntry{Version: img.Version, Source: img.Source(), Path: img.Path(),
		Digest: "sha256:" + Digest("sha256", body), Size: int64(len(body))}, nil
}

func CheckImage(ctx context.Context, store objstore.Store, img deps.Image, _ deps.ImageEntry) error {
	if _, err := store.Head(ctx, img.Path()+"/index.json"); errors.Is(err, objstore.ErrNotFound) {
		return deps.ErrImageMissing
	} else if err != nil {
		return err
	}
	return nil
}
