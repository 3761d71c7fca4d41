// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"

	"podmin.dev/podmin/builtins/deps"
	"podmin.dev/podmin/builtins/lifecycle"
	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/progress"
	"podmin.dev/podmin/internal/secrets"
)

// The cluster lifecycle lives in builtins/lifecycle; these names keep its
// options and results where the CLI and the Starlark host find every
// operation.
type (
	SetupOptions    = lifecycle.SetupOptions
	SetupResult     = lifecycle.SetupResult
	TeardownOptions = lifecycle.TeardownOptions
	TeardownResult  = lifecycle.TeardownResult
	DestroyOptions  = lifecycle.DestroyOptions
	DestroyResult   = lifecycle.DestroyResult
	PlanSummary     = lifecycle.PlanSummary
	SecretAction    = lifecycle.SecretAction
	LocalAgent      = lifecycle.LocalAgent
	ClusterConfig   = lifecycle.ClusterConfig
	// ClusterInfra is a provider's compute and networking.
	ClusterInfra = lifecycle.Infra
)

// ErrInvalidSetup marks a setup flag value that breaks a rule; nothing was
// written or run.
var ErrInvalidSetup = lifecycle.ErrInvalidSetup

// CheckSetupSyntax checks what setup's values must satisfy on every
// provider without a context (lifecycle.CheckSetupSyntax).
func CheckSetupSyntax(opts SetupOptions) error { return lifecycle.CheckSetupSyntax(opts) }

// Setup validates every input, checks it against the provider, shows the
// plan, asks opts.Confirm, then publishes the nodes' dependencies, stores
// the CA secrets (create-only), publishes the cluster configuration and
// applies the infrastructure (lifecycle.Setup).
func (e *Env) Setup(ctx context.Context, opts SetupOptions) (SetupResult, error) {
	if opts.AgentSource != "" {
		opts.AgentSource = e.op().Path(opts.AgentSource)
	}
	return lifecycle.Setup(ctx, e.lifecycleHost(), opts)
}

// Teardown destroys the cluster's compute and networking and keeps the
// bucket, the context and the CA secrets (lifecycle.Teardown).
func (e *Env) Teardown(ctx context.Context, opts TeardownOptions) (TeardownResult, error) {
	return lifecycle.Teardown(ctx, e.lifecycleHost(), opts)
}

// Destroy tears the cluster down, deletes its CA secrets, empties and
// deletes the bucket it proves it created, and removes the context
// (lifecycle.Destroy).
func (e *Env) Destroy(ctx context.Context, opts DestroyOptions) (DestroyResult, error) {
	return lifecycle.Destroy(ctx, e.lifecycleHost(), opts)
}

// lifecycleHost returns e's narrow face to the cluster lifecycle.
func (e *Env) lifecycleHost() lifecycle.Host { return lifecycleHost{e} }

// lifecycleHost is Env as the lifecycle sees it.
type lifecycleHost struct{ e *Env }

func (h lifecycleHost) CurrentContext() (contexts.Context, error) { return h.e.CurrentContext() }

func (h lifecycleHost) OpenCluster(ctx context.Context) (contexts.Context, objstore.Store, error) {
	return h.e.op().OpenCluster(ctx)
}

func (h lifecycleHost) OpenBucket(ctx context.Context, c contexts.Context) (objstore.Bucket, error) {
	p, err := h.e.op().Provider(c.Provider)
	if err != nil {
		return nil, fmt.Errorf("context %s: %w", c.Cluster, err)
	}
	b, err := p.OpenBucket(ctx, cloud.BucketRef{Bucket: c.Bucket, Region: c.Region, Profile: c.Profile})
	if err != nil {
		return nil, fmt.Errorf("open bucket %s of cluster %s: %w", c.Bucket, c.Cluster, err)
	}
	return b, nil
}

func (h lifecycleHost) AgentBucket(c contexts.Context) string {
	if p, err := h.e.op().Provider(c.Provider); err == nil {
		if d, ok := p.(interface{ Dir(string) string }); ok {
			return d.Dir(c.Bucket)
		}
	}
	return c.Bucket
}

var errNoSecrets = errors.New("no secrets providers are configured: the cluster's CA secrets cannot be stored")

func (h lifecycleHost) EnsureCASecrets(ctx context.Context, provider string) (string, []lifecycle.SecretAction, error) {
	if h.e.Secrets == nil {
		return "", nil, errNoSecrets
	}
	res, err := h.e.EnsureCASecrets(ctx, CASecretsOptions{Provider: provider})
	if err != nil {
		return "", nil, err
	}
	out := make([]lifecycle.SecretAction, len(res.Secrets))
	for i, s := range res.Secrets {
		out[i] = lifecycle.SecretAction{Name: s.Name, Action: s.Action}
	}
	return res.Provider, out, nil
}

func (h lifecycleHost) Secrets(ctx context.Context, c contexts.Context, provider string) (secrets.Store, error) {
	if h.e.Secrets == nil {
		return nil, errNoSecrets
	}
	return h.e.Secrets(ctx, c, provider)
}

func (h lifecycleHost) SecretsProviders(c contexts.Context) []string {
	p, err := h.e.op().Provider(c.Provider)
	if err != nil {
		// The context names no provider of this build: its secrets are
		// where the context says.
		return []string{c.SecretsProvider}
	}
	return p.SecretsProviders()
}

func (h lifecycleHost) RemoveContext(cluster string) error {
	return h.e.op().SavedContexts().Update(func(f *contexts.File) error {
		if _, ok := f.Contexts[cluster]; !ok {
			return nil
		}
		delete(f.Contexts, cluster)
		if f.Current == cluster {
			f.Current = ""
		}
		return nil
	})
}

func (h lifecycleHost) Infrastructure(ctx context.Context, c contexts.Context) (lifecycle.Infra, error) {
	if h.e.Infrastructure == nil {
		return nil, fmt.Errorf("provider %q has no infrastructure support in this build: use a local context, or the podmin command, which sets up aws", c.Provider)
	}
	return h.e.Infrastructure(ctx, h, c)
}

func (h lifecycleHost) CacheDir() string { return h.e.Dirs.Cache }

func (h lifecycleHost) AgentRoot(cluster, node string) string {
	return filepath.Join(h.e.Dirs.Data, "nodes", cluster, node)
}

func (h lifecycleHost) Progress(msg string) {
	if h.e.Progress != nil {
		h.e.Progress(msg)
	}
}

func (h lifecycleHost) Transfers() progress.Sink { return h.e.Transfers }

func (h lifecycleHost) Transport() http.RoundTripper { return h.e.Transport }

func (h lifecycleHost) ImageMirror() *deps.OCIMirror {
	return &deps.OCIMirror{Local: h.e.op().ImageStore().WithProgress(h.e.Transfers, "mirror node images"), Remote: h.e.op().RemoteOptions()}
}
