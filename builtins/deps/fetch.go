// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deps

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"podmin.dev/podmin/internal/version"
)

// FetchOptions configure Fetch. The CLI's "podmin fetch" flags and the
// Starlark podmin.deps.fetch keywords map onto them one to one.
type FetchOptions struct {
	// Arch lists architectures; empty means every supported one.
	Arch []string
	// OTelLogs adds the log-export packages (Fluent Bit and libpq5).
	OTelLogs bool
	// AgentSource cross-compiles podmin-agent from this Podmin checkout
	// instead of fetching the published agent.
	AgentSource string
	// ResolveOnly resolves without downloading (a dry run).
	ResolveOnly bool

	// CacheDir is the Podmin cache directory; files land in
	// CacheDir(CacheDir).
	CacheDir string
	// Resolver is the upstream configuration; nil uses the defaults with
	// Client.
	Resolver *Resolver
	// Client downloads; nil is http.DefaultClient.
	Client *http.Client
	// Concurrency bounds parallel downloads.
	Concurrency int
	// Progress receives one line per file.
	Progress func(msg string)
}

// FetchedFile is one file in the local cache.
type FetchedFile struct {
	Key     string `json:"key"`
	Arch    string `json:"arch"`
	Version string `json:"version"`
	Digest  string `json:"digest"`
	// Object is the bucket path setup would publish it under, and Cache
	// where it is on this machine.
	Object string `json:"object"`
	Cache  string `json:"cache"`
	Size   int64  `json:"size"`
}

// FetchResult lists the fetched files in canonical order.
type FetchResult struct {
	Dir   string        `json:"dir"`
	Files []FetchedFile `json:"files"`
}

// ErrUnknownArch marks an architecture name Podmin does not support: a
// bad value given by the caller.
var ErrUnknownArch = errors.New("unknown architecture")

// ParseArchs validates architecture names; none means all. An unknown
// name is an error wrapping ErrUnknownArch.
func ParseArchs(names []string) ([]Arch, error) {
	if len(names) == 0 {
		return slices.Clone(Archs), nil
	}
	var out []Arch
	for _, n := range names {
		a := Arch(n)
		if !slices.Contains(Archs, a) {
			return nil, fmt.Errorf("%w %q: use amd64 or arm64", ErrUnknownArch, n)
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Fetch resolves the dependency set exactly as setup does and downloads
// it into the local cache, verifying every digest. It never reads or
// writes cluster object storage.
func Fetch(ctx context.Context, opts FetchOptions) (FetchResult, error) {
	archs, err := ParseArchs(opts.Arch)
	if err != nil {
		return FetchResult{}, err
	}
	if opts.CacheDir == "" {
		return FetchResult{}, fmt.Errorf("fetch: no cache directory")
	}
	r := opts.Resolver
	if r == nil {
		mirror, err := MirrorFromEnv()
		if err != nil {
			return FetchResult{}, err
		}
		r = &Resolver{Client: opts.Client, AgentVersion: version.Version, Mirror: mirror}
	}
	cache := &Cache{Dir: CacheDir(opts.CacheDir), Client: opts.Client, Concurrency: opts.Concurrency, Progress: opts.Progress}
	var features []Feature
	if opts.OTelLogs {
		features = append(features, OTelLogs)
	}
	po := PublishOptions{Archs: archs, Features: features, Resolver: r, Cache: cache}
	if opts.ResolveOnly {
		po.noAgent = opts.AgentSource != "" // a dry run builds nothing
	} else {
		po.AgentSource = opts.AgentSource
	}
	files, err := Desired(ctx, po)
	if err != nil {
		return FetchResult{}, err
	}
	if !opts.ResolveOnly {
		if files, err = cache.EnsureAll(ctx, files); err != nil {
			return FetchResult{}, err
		}
	}
	res := FetchResult{Dir: cache.Dir}
	for _, f := range files {
		res.Files = append(res.Files, FetchedFile{Key: f.Key, Arch: string(f.Arch), Version: f.Version, Digest: f.Digest,
			Object: f.Path, Cache: cache.Path(f), Size: f.Size})
	}
	return res, nil
}
