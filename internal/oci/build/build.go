// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package build

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"podmin.dev/podmin/internal/oci"
	"podmin.dev/podmin/internal/progress"
)

// ScratchUser is the user of FROM scratch images: the conventional
// unprivileged "nonroot" ID, so images never run as root by default.
const ScratchUser = "65532"

// BaseFunc returns the base image ref for one platform.
type BaseFunc func(ctx context.Context, ref string, platform v1.Platform) (v1.Image, error)

// Options describe one build.
type Options struct {
	// ContextDir is the build context.
	ContextDir string
	// File is the Containerfile; empty means ContextDir/Containerfile, or
	// ContextDir/Dockerfile when that is absent.
	File string
	// Platforms to build; at least one.
	Platforms []v1.Platform
	// Base resolves base images; FROM scratch needs none.
	Base BaseFunc
	// Store, when set, receives every layer while it is built: its tar is
	// streamed through gzip into a blob of Repository in the local store
	// (a temporary file renamed to its digest), so no layer is held in
	// memory, and Store.Write of the result finds the layers in place.
	// The layers are reported as items of one transfer in the store's
	// progress sink (oci.Store.WithProgress).
	// Without a Store layers are kept in memory, which suits small tests.
	Store *oci.Store
	// Repository is the local repository ("registry/repository") that
	// Store receives the layers in; the image is usually written there.
	Repository string
}

// Build builds one image per platform, concurrently, and returns them as
// an OCI image index (also for a single platform).
func Build(ctx context.Context, opts Options) (v1.ImageIndex, error) {
	if len(opts.Platforms) == 0 {
		return nil, errors.New("no platform to build: pass --platform OS/ARCH")
	}
	file, src, err := readContainerfile(opts)
	if err != nil {
		return nil, err
	}
	ins, err := parse(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	specs := make([]spec, len(opts.Platforms))
	for i, p := range opts.Platforms {
		if specs[i], err = evaluate(ins, p); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	bc, err := loadContext(opts.ContextDir)
	if err != nil {
		return nil, err
	}
	t := progress.Or(nil).Begin("", 0)
	if opts.Store != nil {
		t = opts.Store.BeginTransfer(0)
	}
	images := make([]v1.Image, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i := range specs {
		wg.Go(func() {
			images[i], errs[i] = buildImage(ctx, bc, specs[i], opts.Platforms[i], opts, t)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s for %s: %w", file, opts.Platforms[i].String(), errs[i])
			}
		})
	}
	wg.Wait()
	err = errors.Join(errs...)
	t.End(err)
	if err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for i, img := range images {
		p := opts.Platforms[i]
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return idx, nil
}

func readContainerfile(opts Options) (string, string, error) {
	file := opts.File
	if file == "" {
		file = filepath.Join(opts.ContextDir, "Containerfile")
		if _, err := os.Stat(file); err != nil {
			file = filepath.Join(opts.ContextDir, "Dockerfile")
		}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", "", fmt.Errorf("read the Containerfile: %w: pass -f FILE or add a Containerfile to the context", err)
	}
	return file, string(data), nil
}

func buildImage(ctx context.Context, bc *buildContext, s spec, p v1.Platform, opts Options, t progress.Transfer) (v1.Image, error) {
	img, err := baseImage(ctx, s.from, p, opts.Base)
	if err != nil {
		return nil, err
	}
	for _, c := range s.copies {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		entries, err := bc.layerEntries(c)
		if err != nil {
			return nil, err
		}
		it := t.Item(p.String()+": "+c.display, contentSize(entries))
		l, err := buildLayer(ctx, entries, opts, it)
		it.Done()
		if err != nil {
			return nil, fmt.Errorf("line %d: COPY: %w", c.line, err)
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: l, MediaType: types.OCILayer, History: v1.History{
			Created: v1.Time{Time: epoch}, CreatedBy: c.display, Comment: "podmin build",
		}})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	applyConfig(cf, s)
	cf.Created = v1.Time{Time: epoch}
	return mutate.ConfigFile(img, cf)
}

func baseImage(ctx context.Context, from string, p v1.Platform, base BaseFunc) (v1.Image, error) {
	if from == "scratch" {
		img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.Variant, cf.OSVersion = p.OS, p.Architecture, p.Variant, p.OSVersion
		cf.Config.User = ScratchUser
		cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
		return mutate.ConfigFile(img, cf)
	}
	if base == nil {
		return nil, fmt.Errorf("FROM %s: no base image source configured", from)
	}
	img, err := base(ctx, from, p)
	if err != nil {
		return nil, fmt.Errorf("FROM %s: %w", from, err)
	}
	return mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON), nil
}

// applyConfig writes the Containerfile's settings into the image config.
func applyConfig(cf *v1.ConfigFile, s spec) {
	c := &cf.Config
	for _, kv := range s.env {
		prefix := kv[0] + "="
		c.Env = slices.DeleteFunc(c.Env, func(e string) bool { return strings.HasPrefix(e, prefix) })
		c.Env = append(c.Env, prefix+kv[1])
	}
	if len(s.labels) > 0 {
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		maps.Copy(c.Labels, s.labels)
	}
	if s.workdir != "/" || c.WorkingDir == "" {
		c.WorkingDir = s.workdir
	}
	if s.setEntry {
		c.Entrypoint = s.entrypoint
		if !s.setCmd {
			c.Cmd = nil // a new entrypoint drops the base image's arguments
		}
	}
	if s.setCmd {
		c.Cmd = s.cmd
	}
}
