// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import (
	"context"

	ctxops "podmin.dev/podmin/builtins/contexts"
	"podmin.dev/podmin/builtins/deployments"
	"podmin.dev/podmin/builtins/images"
	"podmin.dev/podmin/builtins/install"
	"podmin.dev/podmin/builtins/manifests"
	"podmin.dev/podmin/builtins/openv"
	secretops "podmin.dev/podmin/builtins/secrets"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/secrets"
)

// Every operation of every family, as a method of Env and with its options
// and results under the names the CLI and the Starlark host use. Each
// family lives in its own package (builtins/<family>); this file only
// forwards to it.

// The contexts family (builtins/contexts).
type (
	ConnectOptions    = ctxops.ConnectOptions
	ConnectResult     = ctxops.ConnectResult
	ContextEntry      = ctxops.ContextEntry
	DisconnectOptions = ctxops.DisconnectOptions
	DisconnectResult  = ctxops.DisconnectResult
	UseOptions        = ctxops.UseOptions
)

// Constants of the family above.
const (
	ClusterTag = ctxops.ClusterTag
)

// Errors of the family above.
var (
	ErrForeignBucket = ctxops.ErrForeignBucket
	ErrWouldReplace  = ctxops.ErrWouldReplace
)

// Connect runs ctxops.Connect in e.
func (e *Env) Connect(ctx context.Context, opts ConnectOptions) (ConnectResult, error) {
	return ctxops.Connect(ctx, e.op(), opts)
}

// Disconnect runs ctxops.Disconnect in e.
func (e *Env) Disconnect(opts DisconnectOptions) (DisconnectResult, error) {
	return ctxops.Disconnect(e.op(), opts)
}

// ListContexts runs ctxops.ListContexts in e.
func (e *Env) ListContexts() ([]ContextEntry, error) { return ctxops.ListContexts(e.op()) }

// Use runs ctxops.Use in e.
func (e *Env) Use(opts UseOptions) (contexts.Context, error) { return ctxops.Use(e.op(), opts) }

// The secrets family (builtins/secrets).
type (
	CASecretsOptions     = secretops.CASecretsOptions
	DestroySecretOptions = secretops.DestroySecretOptions
	ListSecretsOptions   = secretops.ListSecretsOptions
	SecretList           = secretops.SecretList
	SecretOptions        = secretops.SecretOptions
	SecretResult         = secretops.SecretResult
	SecretValueOptions   = secretops.SecretValueOptions
)

// CheckListSecrets is secretops.CheckListSecrets.
func CheckListSecrets(opts ListSecretsOptions) error {
	return secretops.CheckListSecrets(opts)
}

// CheckSecretAddress is secretops.CheckSecretAddress.
func CheckSecretAddress(opts SecretOptions) error {
	return secretops.CheckSecretAddress(opts)
}

// CheckSecret runs secretops.CheckSecret in e.
func (e *Env) CheckSecret(opts SecretOptions) error {
	return secretops.CheckSecret(e.op(), opts)
}

// CreateSecret runs secretops.CreateSecret in e.
func (e *Env) CreateSecret(ctx context.Context, opts SecretValueOptions) (SecretResult, error) {
	return secretops.CreateSecret(ctx, e.op(), opts)
}

// DeleteSecret runs secretops.DeleteSecret in e.
func (e *Env) DeleteSecret(ctx context.Context, opts SecretOptions) (SecretResult, error) {
	return secretops.DeleteSecret(ctx, e.op(), opts)
}

// DestroySecret runs secretops.DestroySecret in e.
func (e *Env) DestroySecret(ctx context.Context, opts DestroySecretOptions) (SecretResult, error) {
	return secretops.DestroySecret(ctx, e.op(), opts)
}

// EnsureCASecrets runs secretops.EnsureCASecrets in e.
func (e *Env) EnsureCASecrets(ctx context.Context, opts CASecretsOptions) (secretops.CASecretsResult, error) {
	return secretops.EnsureCASecrets(ctx, e.op(), opts)
}

// ListSecrets runs secretops.ListSecrets in e.
func (e *Env) ListSecrets(ctx context.Context, opts ListSecretsOptions) (SecretList, error) {
	return secretops.ListSecrets(ctx, e.op(), opts)
}

// ReadSecret runs secretops.ReadSecret in e.
func (e *Env) ReadSecret(ctx context.Context, opts SecretOptions) (secrets.Value, SecretResult, error) {
	return secretops.ReadSecret(ctx, e.op(), opts)
}

// RestoreSecret runs secretops.RestoreSecret in e.
func (e *Env) RestoreSecret(ctx context.Context, opts SecretOptions) (SecretResult, error) {
	return secretops.RestoreSecret(ctx, e.op(), opts)
}

// UpdateSecret runs secretops.UpdateSecret in e.
func (e *Env) UpdateSecret(ctx context.Context, opts SecretValueOptions) (SecretResult, error) {
	return secretops.UpdateSecret(ctx, e.op(), opts)
}

// The manifests family (builtins/manifests).
type (
	Extracted       = manifests.Extracted
	InitOptions     = manifests.InitOptions
	InitResult      = manifests.InitResult
	ManifestOptions = manifests.ManifestOptions
	ValidateOptions = manifests.ValidateOptions
)

// Constants of the family above.
const (
	DefaultManifestFile = manifests.DefaultManifestFile
	InitCreated         = manifests.InitCreated
	InitReplaced        = manifests.InitReplaced
	InitUnchanged       = manifests.InitUnchanged
)

// CheckInit runs manifests.CheckInit in e.
func (e *Env) CheckInit(opts InitOptions) error { return manifests.CheckInit(e.op(), opts) }

// Init runs manifests.Init in e.
func (e *Env) Init(opts InitOptions) (InitResult, error) {
	return manifests.Init(e.op(), opts)
}

// Validate runs manifests.Validate in e.
func (e *Env) Validate(opts ValidateOptions) (*Extracted, error) {
	return manifests.Validate(e.op(), opts)
}

// The images family (builtins/images).
type (
	BuildOptions = images.BuildOptions
	ImageResult  = images.ImageResult
	PullOptions  = images.PullOptions
	PushOptions  = images.PushOptions
	PushResult   = images.PushResult
)

// CheckBuild is images.CheckBuild.
func CheckBuild(opts BuildOptions) error { return images.CheckBuild(opts) }

// Build runs images.Build in e.
func (e *Env) Build(ctx context.Context, opts BuildOptions) (ImageResult, error) {
	return images.Build(ctx, e.op(), opts)
}

// Pull runs images.Pull in e.
func (e *Env) Pull(ctx context.Context, opts PullOptions) (ImageResult, error) {
	return images.Pull(ctx, e.op(), opts)
}

// Push runs images.Push in e.
func (e *Env) Push(ctx context.Context, opts PushOptions) (PushResult, error) {
	return images.Push(ctx, e.op(), opts)
}

// The deployments family (builtins/deployments).
type (
	DeleteOptions       = deployments.DeleteOptions
	DeleteResult        = deployments.DeleteResult
	DeployOptions       = deployments.DeployOptions
	DeployResult        = deployments.DeployResult
	DeploymentStatus    = deployments.DeploymentStatus
	IndexRebuildOptions = deployments.IndexRebuildOptions
	IndexRebuildResult  = deployments.IndexRebuildResult
	ListEntry           = deployments.ListEntry
	NodeGroupStatus     = deployments.NodeGroupStatus
	NodeSummary         = deployments.NodeSummary
	PreviewOptions      = deployments.PreviewOptions
	PreviewResult       = deployments.PreviewResult
	StatusOptions       = deployments.StatusOptions
	StatusResult        = deployments.StatusResult
	WaitOptions         = deployments.WaitOptions
	WaitResult          = deployments.WaitResult
	WaitTimeoutError    = deployments.WaitTimeoutError
	WatchOptions        = deployments.WatchOptions
	HistoryOptions      = deployments.HistoryOptions
	HistoryResult       = deployments.HistoryResult
	RevisionInfo        = deployments.RevisionInfo
	RollbackOptions     = deployments.RollbackOptions
	RollbackResult      = deployments.RollbackResult
)

// Constants of the family above.
const (
	StateFailed      = deployments.StateFailed
	StateProgressing = deployments.StateProgressing
	StateReady       = deployments.StateReady
	StateUnknown     = deployments.StateUnknown
	UntilApplied     = deployments.UntilApplied
	UntilReady       = deployments.UntilReady
)

// Errors of the family above.
var (
	ErrDeployChecks = deployments.ErrDeployChecks
	ErrNoDeployment = deployments.ErrNoDeployment
	ErrNodeError    = deployments.ErrNodeError
	ErrSuperseded   = deployments.ErrSuperseded
	ErrNoRevision   = deployments.ErrNoRevision
)

// History runs deployments.History in e.
func (e *Env) History(ctx context.Context, opts HistoryOptions) (HistoryResult, error) {
	return deployments.History(ctx, e.op(), opts)
}

// Rollback runs deployments.Rollback in e.
func (e *Env) Rollback(ctx context.Context, opts RollbackOptions) (RollbackResult, error) {
	return deployments.Rollback(ctx, e.op(), opts)
}

// CheckDeploy runs deployments.CheckDeploy in e.
func (e *Env) CheckDeploy(opts DeployOptions) error {
	return deployments.CheckDeploy(e.op(), opts)
}

// Delete runs deployments.Delete in e.
func (e *Env) Delete(ctx context.Context, opts DeleteOptions) (DeleteResult, error) {
	return deployments.Delete(ctx, e.op(), opts)
}

// Deploy runs deployments.Deploy in e.
func (e *Env) Deploy(ctx context.Context, opts DeployOptions) (DeployResult, error) {
	return deployments.Deploy(ctx, e.op(), opts)
}

// List runs deployments.List in e.
func (e *Env) List(ctx context.Context) ([]ListEntry, error) {
	return deployments.List(ctx, e.op())
}

// Preview runs deployments.Preview in e.
func (e *Env) Preview(ctx context.Context, opts PreviewOptions) (PreviewResult, error) {
	return deployments.Preview(ctx, e.op(), opts)
}

// RebuildIndex runs deployments.RebuildIndex in e.
func (e *Env) RebuildIndex(ctx context.Context, opts IndexRebuildOptions) (IndexRebuildResult, error) {
	return deployments.RebuildIndex(ctx, e.op(), opts)
}

// Status runs deployments.Status in e.
func (e *Env) Status(ctx context.Context, opts StatusOptions) (StatusResult, error) {
	return deployments.Status(ctx, e.op(), opts)
}

// Wait runs deployments.Wait in e.
func (e *Env) Wait(ctx context.Context, opts WaitOptions) (WaitResult, error) {
	return deployments.Wait(ctx, e.op(), opts)
}

// Watch runs deployments.Watch in e.
func (e *Env) Watch(ctx context.Context, opts WatchOptions, show func(StatusResult) error) (StatusResult, error) {
	return deployments.Watch(ctx, e.op(), opts, show)
}

// The install family (builtins/install).
type (
	InstallCloudflaredOptions   = install.InstallCloudflaredOptions
	InstallResult               = install.InstallResult
	UninstallCloudflaredOptions = install.UninstallCloudflaredOptions
)

// Errors of the family above.
var (
	ErrNotInstalled = install.ErrNotInstalled
)

// Cloudflared is install.Cloudflared.
func Cloudflared() openv.PinnedImage { return install.Cloudflared() }

// InstallCloudflared runs install.InstallCloudflared in e.
func (e *Env) InstallCloudflared(ctx context.Context, opts InstallCloudflaredOptions) (InstallResult, error) {
	return install.InstallCloudflared(ctx, e.op(), opts)
}

// UninstallCloudflared runs install.UninstallCloudflared in e.
func (e *Env) UninstallCloudflared(ctx context.Context, opts UninstallCloudflaredOptions) (DeleteResult, error) {
	return install.UninstallCloudflared(ctx, e.op(), opts)
}
