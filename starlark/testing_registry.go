// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	star "go.starlark.net/starlark"
)

// fakeRegistryBuiltin is t.fake_registry(): it starts an in-memory OCI
// registry on 127.0.0.1 for this test only and lets the test's requests
// reach it. Its image(name, platforms=["linux/amd64"]) stores a small
// random multi-platform image and returns the reference to pull.
func fakeRegistryBuiltin(sb *sandbox) *star.Builtin {
	return star.NewBuiltin("t.fake_registry", func(_ *star.Thread, b *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
		if err := star.UnpackArgs(b.Name(), args, kwargs); err != nil {
			return nil, err
		}
		srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		sb.cleanups = append(sb.cleanups, srv.Close)
		host := strings.TrimPrefix(srv.URL, "http://")
		sb.net.allow(host)
		image := star.NewBuiltin("fake_registry.image", func(thread *star.Thread, b *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
			var repo string
			platforms := &star.List{}
			if err := star.UnpackArgs(b.Name(), args, kwargs, "name", &repo, "platforms?", &platforms); err != nil {
				return nil, err
			}
			var ps []string
			for i := 0; i < platforms.Len(); i++ {
				s, ok := star.AsString(platforms.Index(i))
				if !ok {
					return nil, fmt.Errorf("%s: platforms must be strings like \"linux/arm64\", not %s", b.Name(), platforms.Index(i).Type())
				}
				ps = append(ps, s)
			}
			if len(ps) == 0 {
				ps = []string{"linux/amd64"}
			}
			ref := host + "/" + repo
			if err := pushRandomIndex(threadContext(thread), ref, ps); err != nil {
				return nil, fmt.Errorf("%s: %w", b.Name(), err)
			}
			return star.String(ref), nil
		})
		return result("fake_registry", str("host", host), value("image", image)), nil
	})
}

// pushRandomIndex stores an OCI index of small random images, one per
// platform, at ref.
func pushRandomIndex(ctx context.Context, ref string, platforms []string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("%q is not an image name: %w", ref, err)
	}
	var idx v1.ImageIndex = empty.Index
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	for _, p := range platforms {
		plat, err := v1.ParsePlatform(p)
		if err != nil || plat.OS == "" || plat.Architecture == "" {
			return fmt.Errorf("platform %q must be OS/ARCH[/VARIANT]", p)
		}
		img, err := random.Image(512, 1)
		if err != nil {
			return err
		}
		img = mutate.MediaType(img, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		if img, err = mutate.ConfigFile(img, &v1.ConfigFile{OS: plat.OS, Architecture: plat.Architecture, Variant: plat.Variant,
			RootFS: v1.RootFS{Type: "layers"}}); err != nil {
			return err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: plat}})
	}
	return remote.WriteIndex(tag, idx, remote.WithContext(ctx))
}
