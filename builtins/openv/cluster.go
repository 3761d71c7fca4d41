// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package openv

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/oci"
	"podmin.dev/podmin/internal/scrub"
	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/state"
)

// ImageStore is the local image store under the cache directory.
func (e *Env) ImageStore() *oci.Store {
	return oci.NewStore(filepath.Join(e.Dirs.Cache, "images"))
}

// ErrNoSecrets reports an Env without a secrets factory.
var ErrNoSecrets = errors.New("no secrets providers are configured")

// OpenSecrets resolves the secrets provider (the option, else the
// context's default), checks that the context's provider allows it and
// opens it.
func (e *Env) OpenSecrets(ctx context.Context, c contexts.Context, name string) (secrets.Store, error) {
	name, err := e.SecretsProvider(c, name)
	if err != nil {
		return nil, err
	}
	s, err := e.Secrets(ctx, c, name)
	if err != nil {
		return nil, fmt.Errorf("open secrets provider %s: %w", name, err)
	}
	return s, nil
}

// SecretsProvider resolves and checks the secrets provider's name.
func (e *Env) SecretsProvider(c contexts.Context, name string) (string, error) {
	p, err := e.Provider(c.Provider)
	if err != nil {
		return "", fmt.Errorf("context %s: %w", c.Cluster, err)
	}
	allowed := p.SecretsProviders()
	if name == "" {
		name = c.SecretsProvider
	}
	if name == "" {
		name = allowed[0]
	}
	switch {
	case !slices.Contains(manifest.SecretsProviders(), name):
		return "", fmt.Errorf("unknown secrets provider %s: use one of %q", scrub.Quote(name), allowed)
	case !slices.Contains(allowed, name):
		return "", fmt.Errorf("secrets provider %s cannot be used with cluster %s on provider %s: use one of %q", scrub.Quote(name), c.Cluster, p.Name(), allowed)
	case e.Secrets == nil:
		return "", fmt.Errorf("%w: this build cannot open %s", ErrNoSecrets, name)
	}
	return name, nil
}

// ClusterCache is the payload cache seen from the cluster's bucket: bytes
// are shared by every bucket (they are named by their digest), but the
// stamps that prove an object intact without reading it are kept per
// bucket, so one bucket's objects never vouch for another's.
func (e *Env) ClusterCache(c contexts.Context) state.PayloadCache {
	pc := e.PayloadCache()
	if nc, ok := pc.(state.NotedCache); ok {
		return state.ScopedCache(nc, strings.Join([]string{c.Provider, c.Region, c.Bucket}, "\n"))
	}
	return pc
}

// ClusterCommitOptions are the index commit settings with the cluster's
// payload cache.
//
// Every commit refuses a lost index (state.ErrIndexMissing): an index
// this creates over the desired state of a lost one would stop every
// other deployment's Pods on every node.
func (e *Env) ClusterCommitOptions(c contexts.Context) state.CommitOptions {
	o := e.Commit
	if o.Cache == nil {
		o.Cache = e.ClusterCache(c)
	}
	o.RefuseLostIndex = true
	return o
}
