// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"podmin.dev/podmin/agent/pods"
)

// DefaultInterval is the pace of the rounds: probes of a container kubelet
// keeps reporting not ready, and the disk check.
const DefaultInterval = 5 * time.Second

// DefaultMinFree is the free space below which a filesystem counts as
// full: the runtime unpacks layers and kubelet writes logs and volumes
// there.
const DefaultMinFree = 64 << 20

// DiskPaths are where the container runtime and kubelet write, relative to
// the node root.
var DiskPaths = []string{"/var/lib/containerd", "/var/lib/kubelet", "/var/log"}

// probeConcurrency bounds the probes of one round.
const probeConcurrency = 8

// Options configure a Diagnoser.
type Options struct {
	// Root is the node root the disk paths hang off.
	Root string
	// Findings receives, after each round that changed them, the finding
	// of every Pod that has one, by UID.
	Findings func(map[types.UID]string)
	// Disk receives after each round nil, or the filesystems that are full.
	Disk func(error)
	// Interval defaults to DefaultInterval; MinFree to DefaultMinFree.
	Interval time.Duration
	MinFree  uint64
	// Statfs returns the bytes free for the runtime (root) and the size of
	// the filesystem of path; nil uses statfs(2).
	Statfs func(path string) (free, size uint64, err error)
	// Now and After are the clock; nil means the real one.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// Log receives findings as they change; nil discards them.
	Log *slog.Logger
}

// Diagnoser explains Pods kubelet reports not ready. Update feeds it the
// node's Pods; Run makes rounds until its context ends.
type Diagnoser struct {
	opts Options
	log  *slog.Logger
	kick chan struct{}
	mu   sync.Mutex
	pods []*corev1.Pod
	last map[types.UID]string
	disk string
	ran  bool // a round reported
}

// New returns a Diagnoser.
func New(opts Options) *Diagnoser {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.MinFree == 0 {
		opts.MinFree = DefaultMinFree
	}
	if opts.Statfs == nil {
		opts.Statfs = statfs
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.After == nil {
		opts.After = time.After
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Diagnoser{opts: opts, log: log, kick: make(chan struct{}, 1), last: map[types.UID]string{}}
}

// Update takes the node's current Pods (kubelet's complete set) and asks
// for a round; it never blocks.
func (d *Diagnoser) Update(pods []*corev1.Pod) {
	d.mu.Lock()
	d.pods = pods
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Run makes a round at once, after each Update and every Interval, until
// ctx ends.
func (d *Diagnoser) Run(ctx context.Context) error {
	for {
		d.Round(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-d.kick:
		case <-d.opts.After(d.opts.Interval):
		}
	}
}

// Round checks the disks and probes every container kubelet reports
// running and not ready for longer than its probe's initial delay and
// period, then reports what changed.
func (d *Diagnoser) Round(ctx context.Context) {
	d.mu.Lock()
	podList := d.pods
	d.mu.Unlock()
	diskErr := d.checkDisks()
	findings := map[types.UID]string{}
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(probeConcurrency)
	for _, p := range podList {
		if pods.IsReady(p) {
			continue
		}
		g.Go(func() error {
			f := d.diagnose(ctx, p)
			if diskErr != nil {
				f = append(f, diskErr.Error())
			}
			if len(f) > 0 {
				mu.Lock()
				findings[p.UID] = strings.Join(f, "; ")
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	if ctx.Err() != nil {
		return
	}
	disk := ""
	if diskErr != nil {
		disk = diskErr.Error()
	}
	d.mu.Lock()
	changed := !d.ran || !maps.Equal(findings, d.last) || disk != d.disk
	d.last, d.disk, d.ran = findings, disk, true
	d.mu.Unlock()
	if !changed {
		return
	}
	for uid, f := range findings {
		d.log.Info("Pod not ready", "uid", string(uid), "finding", f)
	}
	if d.opts.Disk != nil {
		d.opts.Disk(diskErr)
	}
	if d.opts.Findings != nil {
		d.opts.Findings(maps.Clone(findings))
	}
}

// diagnose probes the unready running containers of p that have a
// readiness probe and have run past its initial delay and one period.
func (d *Diagnoser) diagnose(ctx context.Context, p *corev1.Pod) []string {
	now := d.opts.Now()
	var out []string
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Ready || cs.State.Running == nil {
			continue
		}
		i := slices.IndexFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == cs.Name })
		if i < 0 || p.Spec.Containers[i].ReadinessProbe == nil {
			continue
		}
		c := &p.Spec.Containers[i]
		rp := c.ReadinessProbe
		period := time.Duration(max(rp.PeriodSeconds, 1)) * time.Second
		if rp.PeriodSeconds == 0 {
			period = 10 * time.Second // kubelet's default
		}
		if now.Sub(cs.State.Running.StartedAt.Time) < time.Duration(rp.InitialDelaySeconds)*time.Second+period {
			continue // kubelet may not have probed it yet
		}
		desc, err := Probe(ctx, p, c)
		at := now.UTC().Format(time.TimeOnly)
		switch {
		case errors.Is(err, errExecProbe):
			out = append(out, fmt.Sprintf("container %s: its readiness probe (%s) fails by kubelet's account; %v", c.Name, desc, err))
		case err != nil:
			out = append(out, fmt.Sprintf("container %s: readiness probe %s fails: %v (tried from the node at %s UTC)", c.Name, desc, err, at))
		default:
			out = append(out, fmt.Sprintf("container %s: kubelet reports it not ready, but its readiness probe %s answered the node at %s UTC", c.Name, desc, at))
		}
	}
	return out
}

// checkDisks returns the filesystems beneath the node root that are full.
func (d *Diagnoser) checkDisks() error {
	var full []string
	seen := map[string]bool{}
	for _, p := range DiskPaths {
		path := filepath.Join(d.opts.Root, filepath.FromSlash(p))
		free, size, err := d.opts.Statfs(path)
		if err != nil {
			continue // not on this node (local node mode without a runtime)
		}
		key := fmt.Sprintf("%d/%d", free, size) // one filesystem once
		if free >= d.opts.MinFree || seen[key] {
			continue
		}
		seen[key] = true
		full = append(full, fmt.Sprintf("%s has %s free of %s", path, bytesText(free), bytesText(size)))
	}
	if len(full) == 0 {
		return nil
	}
	return fmt.Errorf("the node's disk is full (%s): the container runtime and kubelet cannot write there; free space", strings.Join(full, ", "))
}

func statfs(path string) (free, size uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	bsize := uint64(st.Bsize)
	return st.Bfree * bsize, st.Blocks * bsize, nil
}

// bytesText writes a byte count the way an operator reads it.
func bytesText(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
