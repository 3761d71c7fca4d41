// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"fmt"
	"net/http"

	"podmin.dev/podmin/builtins/deps"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/progress"
	"podmin.dev/podmin/internal/secrets"
)

// Host is what the lifecycle needs from the operation it runs in (the CLI's,
// a recipe's or a dry run's); builtins.Env provides it.
type Host interface {
	BootstrapHost
	// CurrentContext returns the selected context.
	CurrentContext() (contexts.Context, error)
	// OpenBucket opens c's bucket with its administration (existence,
	// tags, deletion).
	OpenBucket(ctx context.Context, c contexts.Context) (objstore.Bucket, error)
	// AgentBucket is how a node agent names c's bucket (a local bucket's
	// directory).
	AgentBucket(c contexts.Context) string
	// AgentRoot is the directory a local node agent of the cluster uses
	// as its root: agents on one machine each need their own.
	AgentRoot(cluster, node string) string
	// EnsureCASecrets create-only stores the cluster's CA secrets in the
	// named secrets provider and returns the store's name and, per
	// secret, "created" or "existing".
	EnsureCASecrets(ctx context.Context, provider string) (string, []SecretAction, error)
	// Secrets opens the named secrets provider for c; an error when none
	// are configured.
	Secrets(ctx context.Context, c contexts.Context, provider string) (secrets.Store, error)
	// SecretsProviders names the secrets providers c's cloud provider
	// offers: wherever the cluster's secrets may be.
	SecretsProviders(c contexts.Context) []string
	// RemoveContext forgets the saved context of cluster; an absent one is
	// already gone.
	RemoveContext(cluster string) error
	// Infrastructure opens the compute and networking of c's cloud
	// provider (never the local one, which the lifecycle owns).
	Infrastructure(ctx context.Context, c contexts.Context) (Infra, error)
}

// BootstrapHost is what the node bootstrap and the AWS infrastructure need
// from the operation.
type BootstrapHost interface {
	// OpenCluster opens the current context's bucket.
	OpenCluster(ctx context.Context) (contexts.Context, objstore.Store, error)
	// CacheDir is the Podmin cache directory.
	CacheDir() string
	// Progress reports one human-readable progress line.
	Progress(msg string)
	// Transfers shows the progress of long transfers; nil shows nothing.
	Transfers() progress.Sink
	// Transport carries downloads and registry requests; nil is the
	// default transport.
	Transport() http.RoundTripper
	// ImageMirror mirrors the node images from their registries through
	// the local image store.
	ImageMirror() *deps.OCIMirror
}

// progressf formats one progress line.
func progressf(h BootstrapHost, format string, args ...any) {
	h.Progress(fmt.Sprintf(format, args...))
}
