// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"podmin.dev/podmin/builtins/deps"
	"podmin.dev/podmin/builtins/infra"
	"podmin.dev/podmin/builtins/userdata"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/objstore/overlay"
	"podmin.dev/podmin/internal/version"
)

// AWSBootstrap is the node bootstrap of an AWS cluster. Stage runs
// setup's dependency step (userdata.Bootstrap over deps.Publish) before
// the plan is shown, into a staging layer over the cluster bucket that
// keeps only sizes and digests of large files, so nothing is written
// before confirmation; UserData and JoolArchive are rendered from the
// staged manifest. Publish then runs the same step for real, on exactly
// the files Stage resolved: user data names files by path and digest
// alone, and images by their pinned path and version, so the published
// manifest renders the user data the plan showed. The bucket is the one
// the Host opens, so a dry run publishes only into its overlay.
type AWSBootstrap struct {
	// Host is the operation's face (a dry run's own): it opens the
	// bucket, holds the caches and receives progress.
	Host BootstrapHost
	// EC2 names the pinned AMIs, whose Debian image manifests give the
	// NAT64 kernels.
	EC2 infra.EC2API
	// Resolver asks the upstream release APIs; nil asks the real ones for
	// the agent matching this CLI's version.
	Resolver *deps.Resolver
	// Client downloads dependency files into the cache; nil uses the
	// Host's Transport, else http.DefaultClient.
	Client *http.Client
	// Mirror and Check publish the image dependencies; nil uses the
	// Host's ImageMirror.
	Mirror func(ctx context.Context, store objstore.Store, img deps.Image) (deps.ImageEntry, error)
	Check  func(ctx context.Context, store objstore.Store, img deps.Image, e deps.ImageEntry) error
	// ImageManifestURL maps an official Debian AMI name to its versioned
	// image manifest; nil is userdata.DebianImageManifestURL.
	ImageManifestURL func(amiName string) (string, error)
	// StageKeepAtMost is the largest streamed object the staging layer
	// keeps whole (image manifests and indexes); larger ones are only
	// hashed. Zero is one MiB; tests lower it to drop every file.
	StageKeepAtMost int64

	mu     sync.Mutex
	staged *userdata.Bootstrap
	files  []deps.File
	last   *deps.PublishResult
}

var _ NodeBootstrap = (*AWSBootstrap)(nil)

// defaultStageKeepAtMost is StageKeepAtMost's default.
const defaultStageKeepAtMost int64 = 1 << 20

// Published returns the result of the dependency step's publication, or
// nil before it ran.
func (a *AWSBootstrap) Published() *deps.PublishResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

// Stage implements NodeBootstrap: it resolves and downloads the complete
// dependency set for every architecture of cl and stages its publication
// without writing the bucket (retention waits for Publish too).
func (a *AWSBootstrap) Stage(ctx context.Context, cl infra.Cluster, amis map[string]string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.staged != nil {
		return nil
	}
	_, store, err := a.Host.OpenCluster(ctx)
	if err != nil {
		return err
	}
	opts, res, err := a.options(cl)
	if err != nil {
		return err
	}
	keep := a.StageKeepAtMost
	if keep == 0 {
		keep = defaultStageKeepAtMost
	}
	opts.SkipRetention = true
	// Hashing cached files into the staging layer is no upload.
	opts.Transfers, opts.Progress = nil, nil
	b := &userdata.Bootstrap{Store: overlay.New(store, overlay.Options{KeepAtMost: keep}),
		Cluster: cl.ID, Bucket: cl.Bucket, Region: cl.Region, Options: opts,
		Kernel: func(ctx context.Context, arch deps.Arch) (string, error) {
			return a.kernel(ctx, res, amis[string(arch)])
		}}
	staged, err := b.Publish(ctx)
	if err != nil {
		return fmt.Errorf("resolve the node dependencies: %w", err)
	}
	a.staged, a.files = b, staged.Files
	if n := len(staged.Uploaded) + len(staged.Images); n > 0 || staged.Written {
		progressf(a.Host, "%d node dependency files and images are published under dependencies/ and mirror/ once the plan is confirmed", n)
	}
	return nil
}

// Publish implements NodeBootstrap: it publishes the files Stage resolved
// into the bucket (a matching manifest transfers nothing) and applies
// retention.
func (a *AWSBootstrap) Publish(ctx context.Context, cl infra.Cluster) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.staged == nil {
		return errors.New("the node dependencies were not staged (a Podmin bug: Stage runs first)")
	}
	_, store, err := a.Host.OpenCluster(ctx)
	if err != nil {
		return err
	}
	opts := a.staged.Options
	opts.Files = a.files
	opts.SkipRetention = false
	opts.Transfers, opts.Progress = a.Host.Transfers(), a.Host.Progress
	b := &userdata.Bootstrap{Store: store, Cluster: cl.ID, Bucket: cl.Bucket, Region: cl.Region, Options: opts}
	res, err := b.Publish(ctx)
	if err != nil {
		return fmt.Errorf("publish the node dependencies: %w", err)
	}
	a.last = &res
	if n := len(res.Uploaded) + len(res.Images); n > 0 || res.Written {
		progressf(a.Host, "published %d node dependency files and images under dependencies/ and mirror/", n)
	} else {
		progressf(a.Host, "node dependencies are current: nothing to transfer")
	}
	return nil
}

// UserData implements NodeBootstrap.
func (a *AWSBootstrap) UserData(ctx context.Context, _ infra.Cluster, ng infra.NodeGroup) (string, error) {
	b, err := a.stagedBootstrap()
	if err != nil {
		return "", err
	}
	return b.NodeUserData(ctx, ng.Name, deps.Arch(ng.Arch))
}

// JoolArchive implements NodeBootstrap.
func (a *AWSBootstrap) JoolArchive(ctx context.Context, _ infra.Cluster, arch, _ string) (infra.JoolArchive, error) {
	b, err := a.stagedBootstrap()
	if err != nil {
		return infra.JoolArchive{}, err
	}
	key, sum, err := b.JoolArchive(ctx, deps.Arch(arch))
	if err != nil {
		return infra.JoolArchive{}, err
	}
	return infra.JoolArchive{Key: key, SHA256: sum}, nil
}

func (a *AWSBootstrap) stagedBootstrap() (*userdata.Bootstrap, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.staged == nil {
		return nil, errors.New("the node dependencies were not staged (a Podmin bug: Stage runs first)")
	}
	return a.staged, nil
}

// options returns the publication options for cl and the resolver they
// use; deps.MirrorEnv points the resolver at a mirror.
func (a *AWSBootstrap) options(cl infra.Cluster) (deps.PublishOptions, *deps.Resolver, error) {
	client := a.Client
	if t := a.Host.Transport(); client == nil && t != nil {
		client = &http.Client{Transport: t}
	}
	res := a.Resolver
	if res == nil {
		mirror, err := deps.MirrorFromEnv()
		if err != nil {
			return deps.PublishOptions{}, nil, err
		}
		res = &deps.Resolver{Client: client, AgentVersion: version.Version, Mirror: mirror}
	}
	opts := deps.PublishOptions{
		Resolver:    res,
		AgentSource: cl.AgentSource,
		Images:      deps.Images,
		Mirror:      a.Mirror,
		Check:       a.Check,
		Cache: &deps.Cache{Dir: deps.CacheDir(a.Host.CacheDir()), Client: client, Progress: a.Host.Progress,
			Transfers: a.Host.Transfers()},
		Warn:      a.Host.Progress,
		Progress:  a.Host.Progress,
		Transfers: a.Host.Transfers(),
	}
	if opts.Mirror == nil {
		m := a.Host.ImageMirror()
		opts.Mirror, opts.Check = m.Mirror, m.Check
	}
	if cl.OtelLogs != "" {
		opts.Features = append(opts.Features, deps.OTelLogs)
	}
	for _, s := range cl.Architectures() {
		opts.Archs = append(opts.Archs, deps.Arch(s))
	}
	for _, s := range cl.NAT64Arch {
		if arch := deps.Arch(s); !slices.Contains(opts.NAT64Archs, arch) {
			opts.NAT64Archs = append(opts.NAT64Archs, arch)
		}
		if arch := deps.Arch(s); !slices.Contains(opts.Archs, arch) {
			opts.Archs = append(opts.Archs, arch)
		}
	}
	slices.Sort(opts.Archs)
	slices.Sort(opts.NAT64Archs)
	return opts, res, nil
}

// kernel reads the pinned AMI's name from EC2 and the exact initial kernel
// from Debian's versioned image manifest of that build.
func (a *AWSBootstrap) kernel(ctx context.Context, r *deps.Resolver, ami string) (string, error) {
	if ami == "" {
		return "", errors.New("no AMI is pinned for this architecture")
	}
	out, err := a.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{ami}})
	if err != nil {
		return "", fmt.Errorf("describe AMI %s: %w", ami, err)
	}
	if len(out.Images) != 1 {
		return "", fmt.Errorf("AMI %s: EC2 returned %d images", ami, len(out.Images))
	}
	manifestURL := a.ImageManifestURL
	if manifestURL == nil {
		manifestURL = userdata.DebianImageManifestURL
	}
	url, err := manifestURL(aws.ToString(out.Images[0].Name))
	if err != nil {
		return "", err
	}
	return r.ImageKernel(ctx, url)
}
