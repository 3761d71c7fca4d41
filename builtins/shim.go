// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

// The operations still in this package reach the shared environment
// through these until they move into their families' packages.

import (
	"context"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"podmin.dev/podmin/builtins/deployments"
	"podmin.dev/podmin/builtins/manifests"
	"podmin.dev/podmin/builtins/openv"
	secretops "podmin.dev/podmin/builtins/secrets"
	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/oci"
	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/state"
)

func (e *Env) path(p string) string                               { return e.op().Path(p) }
func (e *Env) lookupEnv(k string) (string, bool)                  { return e.op().Getenv(k) }
func (e *Env) progress(format string, args ...any)                { e.op().Progressf(format, args...) }
func (e *Env) providerNames() []string                            { return e.op().ProviderNames() }
func (e *Env) provider(n string) (cloud.Provider, error)          { return e.op().Provider(n) }
func (e *Env) payloadCache() state.PayloadCache                   { return e.op().PayloadCache() }
func (e *Env) explain(c contexts.Context, err error) error        { return e.op().Explain(c, err) }
func (e *Env) readPath(p string) (string, error)                  { return e.op().ReadPath(p) }
func (e *Env) contextsFile() ContextsFile                         { return e.op().SavedContexts() }
func (e *Env) files() Files                                       { return e.op().LocalFiles() }
func (e *Env) remoteOptions() []remote.Option                     { return e.op().RemoteOptions() }
func (e *Env) now() time.Time                                     { return e.op().CurrentTime() }
func (e *Env) sleep(ctx context.Context, d time.Duration) error   { return e.op().Pause(ctx, d) }
func (e *Env) imageStore() *oci.Store                             { return e.op().ImageStore() }
func (e *Env) warn(ws []Warning) []Warning                        { return e.op().Warn(ws) }
func (e *Env) clusterCache(c contexts.Context) state.PayloadCache { return e.op().ClusterCache(c) }
func (e *Env) clusterCommitOptions(c contexts.Context) state.CommitOptions {
	return e.op().ClusterCommitOptions(c)
}
func (e *Env) openCluster(ctx context.Context) (contexts.Context, objstore.Store, error) {
	return e.op().OpenCluster(ctx)
}
func (e *Env) openSecrets(ctx context.Context, c contexts.Context, n string) (secrets.Store, error) {
	return e.op().OpenSecrets(ctx, c, n)
}
func (e *Env) secretsProvider(c contexts.Context, n string) (string, error) {
	return e.op().SecretsProvider(c, n)
}
func manifestWarnings(ws []manifest.Warning) []Warning { return openv.ManifestWarnings(ws) }

func checkSecretsProviderName(n string) error { return secretops.CheckProviderName(n) }

func (e *Env) buildManifest(o ManifestOptions) ([]byte, *manifest.Result, error) {
	return manifests.BuildManifest(e.op(), o)
}
func (e *Env) readFile(n string) ([]byte, error) { return manifests.ReadFile(e.op(), n) }
func (e *Env) checkManifestOptions(o ManifestOptions) error {
	return manifests.CheckManifestOptions(e.op(), o)
}

const OriginAnnotation = deployments.OriginAnnotation
