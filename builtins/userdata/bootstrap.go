// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package userdata

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"podmin.dev/podmin/builtins/deps"
	"podmin.dev/podmin/internal/objstore"
)

// Bootstrap is setup's dependency step and user-data source: the first
// call publishes the complete dependency set for every NodeGroup and
// NAT64 architecture (deps.Publish: a matching manifest transfers
// nothing), and every NodeGroup's user data and every NAT64 architecture's
// Jool archive are then taken from that one published manifest.
type Bootstrap struct {
	// Store is the cluster bucket.
	Store objstore.Store
	// Cluster, Bucket and Region are the cluster's.
	Cluster, Bucket, Region string
	// Options configure publication; Archs and NAT64Archs list every
	// architecture in use.
	Options deps.PublishOptions
	// Kernel returns the NAT64 AMI's exact initial kernel for an
	// architecture (see DebianImageManifestURL and Resolver.ImageKernel);
	// it is called once per NAT64 architecture before publication.
	Kernel func(ctx context.Context, arch deps.Arch) (string, error)

	once    sync.Once
	result  deps.PublishResult
	kernels map[deps.Arch]string
	errOnce error
}

// Publish runs the dependency step once and returns its result.
func (b *Bootstrap) Publish(ctx context.Context) (deps.PublishResult, error) {
	b.once.Do(func() {
		opts := b.Options
		b.kernels = map[deps.Arch]string{}
		if len(opts.NAT64Archs) > 0 && opts.Files == nil {
			if b.Kernel == nil || opts.Resolver == nil {
				b.errOnce = fmt.Errorf("NAT64 needs the AMI's kernel and a resolver to mirror the matching Jool modules")
				return
			}
			r := *opts.Resolver
			r.Kernels = map[deps.Arch]string{}
			for _, a := range opts.NAT64Archs {
				k, err := b.Kernel(ctx, a)
				if err != nil {
					b.errOnce = fmt.Errorf("the NAT64 kernel for %s: %w", a, err)
					return
				}
				r.Kernels[a], b.kernels[a] = k, k
			}
			opts.Resolver = &r
		}
		b.result, b.errOnce = deps.Publish(ctx, b.Store, opts)
	})
	return b.result, b.errOnce
}

// NodeUserData returns the base64 launch-template user data of a
// NodeGroup.
func (b *Bootstrap) NodeUserData(ctx context.Context, nodegroup string, arch deps.Arch) (string, error) {
	res, err := b.Publish(ctx)
	if err != nil {
		return "", err
	}
	r, err := RenderNode(Node{Cluster: b.Cluster, NodeGroup: nodegroup, Bucket: b.Bucket, Region: b.Region, Arch: arch,
		Manifest: res.Manifest, OTelLogs: slices.Contains(b.Options.Features, deps.OTelLogs)})
	if err != nil {
		return "", err
	}
	return r.Base64, nil
}

// JoolArchive returns the bucket key and SHA-256 hex digest of the Jool
// archive published for arch's NAT64 kernel.
func (b *Bootstrap) JoolArchive(ctx context.Context, arch deps.Arch) (key, sha256 string, err error) {
	res, err := b.Publish(ctx)
	if err != nil {
		return "", "", err
	}
	f, ok := res.Manifest.Dependencies["jool"][arch]
	if !ok {
		return "", "", fmt.Errorf("no Jool modules were published for %s: list it in NAT64Archs", arch)
	}
	hexd, ok := strings.CutPrefix(f.Digest, "sha256:")
	if !ok {
		return "", "", fmt.Errorf("the Jool archive %s has digest %s, not SHA-256", f.Path, f.Digest)
	}
	return f.Path, hexd, nil
}

// debianAMIName matches the official Debian 13 AMI names, e.g.
// debian-13-arm64-20250814-2204.
var debianAMIName = regexp.MustCompile(`^debian-13-(amd64|arm64)-(\d{8}-\d{4})$`)

// DebianImageManifestURL returns the immutable versioned image manifest
// Debian publishes beside the build an official Debian 13 AMI was made
// from.
func DebianImageManifestURL(amiName string) (string, error) {
	m := debianAMIName.FindStringSubmatch(amiName)
	if m == nil {
		return "", fmt.Errorf("AMI %q is not an official Debian 13 image (debian-13-<arch>-<yyyymmdd>-<hhmm>)", amiName)
	}
	return fmt.Sprintf("https://cloud.debian.org/images/cloud/trixie/%s/debian-13-ec2-%s-%s.json", m[2], m[1], m[2]), nil
}
