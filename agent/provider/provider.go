// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"fmt"
	"path/filepath"

	"podmin.dev/podmin/agent/identity"
	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/internal/cloud"
	awscloud "podmin.dev/podmin/internal/cloud/aws"
	cloudlocal "podmin.dev/podmin/internal/cloud/local"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/secrets"
	secretslocal "podmin.dev/podmin/internal/secrets/local"
)

// Node is where a node's provider keeps the cluster: the agent's
// --provider, --bucket and --region, and the Podmin data directory the
// local provider keeps named buckets and secrets in.
type Node struct {
	Provider, Bucket, Region string
	DataDir                  string
}

// Local reports whether the node runs in local node mode.
func (n Node) Local() bool { return n.Provider == "local" }

// Open opens the cluster bucket, the secrets providers Pods mount and the
// system secrets store.
func Open(ctx context.Context, n Node) (objstore.Bucket, map[string]mounts.Reader, identity.SecretReader, error) {
	store, err := OpenBucket(ctx, n)
	if err != nil {
		return nil, nil, nil, err
	}
	readers, err := SecretReaders(ctx, n)
	if err != nil {
		return nil, nil, nil, err
	}
	system, err := SystemSecrets(ctx, n)
	if err != nil {
		return nil, nil, nil, err
	}
	return store, readers, system, nil
}

// OpenBucket opens the cluster bucket read-side.
func OpenBucket(ctx context.Context, n Node) (objstore.Bucket, error) {
	var p cloud.Provider = awscloud.Provider{}
	if n.Local() {
		if n.DataDir == "" && !filepath.IsAbs(n.Bucket) {
			return nil, fmt.Errorf("--bucket %q is a name, but the Podmin data directory is unknown: pass an absolute directory or set XDG_DATA_HOME", n.Bucket)
		}
		p = cloudlocal.New(n.DataDir)
	}
	if err := p.ValidateBucketName(n.Bucket); err != nil {
		return nil, fmt.Errorf("--bucket: %w", err)
	}
	b, err := p.OpenBucket(ctx, cloud.BucketRef{Bucket: n.Bucket, Region: n.Region})
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", n.Bucket, err)
	}
	return b, nil
}

// SecretReaders returns the providers whose values this node can mount.
func SecretReaders(ctx context.Context, n Node) (map[string]mounts.Reader, error) {
	readers := map[string]mounts.Reader{}
	if n.Local() {
		if n.DataDir != "" {
			readers[secrets.Local] = mounts.StoreReader{Store: secretslocal.New(filepath.Join(n.DataDir, "secrets"))}
		}
		return readers, nil
	}
	for _, name := range []string{secrets.ParameterStore, secrets.SecretsManager} {
		s, err := awscloud.OpenSecrets(ctx, name, awscloud.SecretsOptions{Region: n.Region})
		if err != nil {
			return nil, err
		}
		readers[name] = mounts.StoreReader{Store: s}
	}
	return readers, nil
}

// SystemSecrets opens the provider's system secrets store, where setup
// keeps the cluster CA and the workload CA key; nil when the local data
// directory is unknown.
func SystemSecrets(ctx context.Context, n Node) (identity.SecretReader, error) {
	if n.Local() {
		if n.DataDir == "" {
			return nil, nil
		}
		return secretslocal.New(filepath.Join(n.DataDir, "secrets")), nil
	}
	return awscloud.OpenSecrets(ctx, secrets.ParameterStore, awscloud.SecretsOptions{Region: n.Region})
}
