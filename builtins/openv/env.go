// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package openv

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"time"

	"podmin.dev/podmin/builtins/lifecycle"
	"podmin.dev/podmin/internal/cache"
	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/progress"
	"podmin.dev/podmin/internal/scrub"
	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/state"
)

// Env is what every operation needs from its surroundings. The CLI builds
// one from the process; tests build one around temporary directories.
type Env struct {
	// Dirs are the per-user state directories.
	Dirs paths.Dirs
	// Providers are the available providers by --provider name.
	Providers map[string]cloud.Provider
	// Progress receives human-readable progress lines (stderr in the CLI);
	// nil discards them.
	Progress func(msg string)
	// Transfers shows the progress of long transfers (push, pull, build):
	// bars on a terminal, periodic lines in logs; nil shows nothing. The
	// CLI and recipes share it, so a recipe's push shows the same bars.
	Transfers progress.Sink
	// WorkDir resolves relative file paths; empty means the process's
	// working directory.
	WorkDir string
	// LookupEnv resolves environment variables that operations inherit on
	// purpose (init/deploy --env KEY); nil means none are set.
	LookupEnv func(key string) (string, bool)
	// Stdin is read for a file named "-"; nil refuses it.
	Stdin io.Reader
	// WrapStore, when set, wraps the cluster bucket's store (tests count
	// requests and inject faults with it).
	WrapStore func(objstore.Store) objstore.Store
	// Commit tunes the deployment index commit loop; zero uses defaults.
	Commit state.CommitOptions
	// Timeout is the overall deadline the caller put on the context, named
	// in the error of a request it cut off; zero means none was set.
	Timeout time.Duration
	// CacheMaxBytes bounds the object cache under Dirs.Cache; zero uses
	// cache.DefaultMaxBytes.
	CacheMaxBytes int64
	// Secrets opens the secrets provider named provider for a context; the
	// CLI wires the real providers, tests wire fakes. Nil refuses every
	// secret operation.
	Secrets func(ctx context.Context, c contexts.Context, provider string) (secrets.Store, error)
	// Scrub registers every secret value an operation handles, so it is
	// scrubbed from all output; nil registers nothing (the CLI passes the
	// process's registry).
	Scrub *scrub.Registry
	// Contexts, when set, replaces the contexts file in Dirs.Config.
	Contexts ContextsFile
	// Selection names the context operations use instead of the contexts
	// file's current one (--context, PODMIN_CONTEXT, a recipe's
	// contexts.use); the zero Selection uses the current one. It belongs
	// to this Env only: changing it never touches the machine-wide file.
	Selection contexts.Selection
	// Files, when set, replaces the real file system for the files
	// operations read and write (OSFiles).
	Files Files
	// Transport, when set, carries every registry request (pull, build's
	// base images); a recipe test sets one that refuses the network.
	Transport http.RoundTripper
	// Infrastructure opens a cloud provider's compute and networking for
	// setup, teardown and destroy, for the operation whose face is h (a
	// dry run's own); nil supports only the local provider.
	Infrastructure func(ctx context.Context, h lifecycle.Host, c contexts.Context) (lifecycle.Infra, error)
	// Now and Sleep are the clock of waits (deploy --wait, status --wait);
	// nil means the real clock. Recipe tests advance a virtual one.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// UpstreamRegistries replaces an upstream registry host (docker.io)
	// with another address when an install mirrors a pinned image; tests
	// point it at a local registry. Nil fetches from the real registries.
	UpstreamRegistries map[string]string
	// CloudflaredImage, when set, replaces the cloudflared image Podmin
	// pins (Cloudflared()); tests point it at an image whose blobs they
	// hold. Nil installs the pinned image.
	CloudflaredImage *PinnedImage
}

// Path resolves a user-supplied file path against WorkDir.
func (e *Env) Path(p string) string {
	if filepath.IsAbs(p) || e.WorkDir == "" {
		return p
	}
	return filepath.Join(e.WorkDir, p)
}

// Getenv looks up an inherited environment variable through LookupEnv.
func (e *Env) Getenv(key string) (string, bool) {
	if e.LookupEnv == nil {
		return "", false
	}
	return e.LookupEnv(key)
}

// Progressf reports one progress line.
func (e *Env) Progressf(format string, args ...any) {
	if e.Progress != nil {
		e.Progress(fmt.Sprintf(format, args...))
	}
}

// ProviderNames lists the configured providers in sorted order.
func (e *Env) ProviderNames() []string {
	names := make([]string, 0, len(e.Providers))
	for n := range e.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Provider returns the configured provider called name.
func (e *Env) Provider(name string) (cloud.Provider, error) {
	if name == "" {
		return nil, fmt.Errorf("no provider given: pass --provider with one of %q", e.ProviderNames())
	}
	p, ok := e.Providers[name]
	if !ok {
		return nil, fmt.Errorf("unknown provider %s: use one of %q", scrub.Quote(name), e.ProviderNames())
	}
	return p, nil
}

// CurrentContext returns the context in effect (Selection, else the
// file's current one), or an error telling the operator how to select or
// connect one. Every operation except connect and use calls it.
func (e *Env) CurrentContext() (contexts.Context, error) {
	f, err := e.SavedContexts().Load()
	if err != nil {
		return contexts.Context{}, err
	}
	return f.Resolve(e.Selection)
}

// PayloadCache is the content-addressed object cache under the Podmin cache
// directory, or nil when there is none (list, deploy and preview then read
// the bucket).
func (e *Env) PayloadCache() state.PayloadCache {
	if e.Commit.Cache != nil {
		return e.Commit.Cache
	}
	if e.Dirs.Cache == "" {
		return nil
	}
	return cache.Open(filepath.Join(e.Dirs.Cache, "objects"), e.CacheMaxBytes)
}

// OpenCluster opens the current context's bucket.
func (e *Env) OpenCluster(ctx context.Context) (contexts.Context, objstore.Store, error) {
	c, err := e.CurrentContext()
	if err != nil {
		return contexts.Context{}, nil, err
	}
	p, err := e.Provider(c.Provider)
	if err != nil {
		return contexts.Context{}, nil, fmt.Errorf("context %s: %w", c.Cluster, err)
	}
	b, err := p.OpenBucket(ctx, cloud.BucketRef{Bucket: c.Bucket, Region: c.Region, Profile: c.Profile})
	if err != nil {
		return contexts.Context{}, nil, fmt.Errorf("open bucket %s of cluster %s: %w", c.Bucket, c.Cluster, err)
	}
	var s objstore.Store = &deadlineStore{Store: b, bucket: c.Bucket, endpoint: endpointOf(b), timeout: e.Timeout}
	if e.WrapStore != nil {
		s = e.WrapStore(s)
	}
	return c, s, nil
}
