// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/agent/cri"
	"podmin.dev/podmin/agent/daemon"
	"podmin.dev/podmin/agent/diagnose"
	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/agent/pods"
	"podmin.dev/podmin/agent/provider"
	"podmin.dev/podmin/agent/registry"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/agent/telemetry"
	"podmin.dev/podmin/agent/workload"
	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
)

// Health components the kubelet watcher and the diagnoser report under.
const (
	componentKubelet = "kubelet"
	componentDisk    = "disk"
)

// identityInterval is how often the agent re-reads identity/ca.json and
// checks its leaves for renewal (and paces the log export's retries).
const identityInterval = 30 * time.Second

// Run is the agent: it validates cfg, assembles the components and runs
// them until ctx ends (SIGTERM), then shuts down in order.
func Run(ctx context.Context, cfg Config, opts Options) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if localMode(cfg) && opts.Dataplane == DataplaneOn && !opts.NodeAddr.IsValid() {
		return fmt.Errorf("%s=%s: local node mode has no node address the dataplane could source-NAT Service traffic to "+
			"(its identity address is a documentation address): set %s to this machine's global IPv6 address, or leave the dataplane off",
			EnvDataplane, DataplaneOn, EnvNodeAddr)
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("cluster", cfg.Cluster)
	// The provider: the cluster bucket, the secrets Pods mount, the system
	// secrets holding the cluster and workload CAs.
	place := provider.Node{Provider: cfg.Provider, Bucket: cfg.Bucket, Region: cfg.Region, DataDir: opts.DataDir}
	store, readers, system, err := provider.Open(ctx, place)
	if err != nil {
		return err
	}
	hl := health.NewHealth(staticpod.Component)
	kubelet := !localMode(cfg) || pods.SocketExists(opts.Root)
	// Coordination (node identity, coordinator, Service DNS, dataplane)
	// serves only a running agent; a one-shot pass publishes Pods alone.
	var rs *registry.Server
	if opts.RegistryAddr != "" {
		rs = registry.NewServer(opts.RegistryAddr, EnvRegistryAddr, store, log)
	}
	var co *coordinator.Node
	if !opts.Once {
		co, err = coordinator.NewNode(ctx, coordinator.NodeOptions{Settings: opts.Settings, Cluster: cfg.Cluster,
			NodeGroup: cfg.NodeGroup, PodPrefix: cfg.IPv6Prefix, Local: localMode(cfg), Root: opts.Root, Secrets: system,
			Store: store, Kubelet: kubelet, NodeRegistry: rs.Serving, Health: hl, Log: log})
		if err != nil {
			return err
		}
	}
	coord := co.Coordinator()
	// Only the elected agent creates or rotates identity/ca.json: an agent
	// without coordination never does, and a one-shot pass only when it
	// wins the lease for its pass.
	var leader workload.Leader = workload.Never{}
	publisher, node := opts.Publisher, opts.NodeID
	if publisher == nil {
		publisher = &staticpod.Recorder{}
	}
	if co != nil {
		publisher, leader, node = co.Publisher(opts.Publisher), coord.Elector(), co.ID()
	}
	if node == "" {
		if node, err = os.Hostname(); err != nil {
			return fmt.Errorf("node ID: %w: set %s", err, EnvNodeID)
		}
	}
	if opts.Once {
		once, err := election.NewOnce(ctx, node, store, log)
		if err != nil {
			return err
		}
		defer once.End()
		leader = once
	}
	wopts := workload.Options{Store: store, Cluster: cfg.Cluster, Root: opts.Root, Leader: leader, NodeGroup: cfg.NodeGroup,
		Node: node, Log: log.With("component", "workload")}
	if opts.RestartWindow != nil {
		wopts.RestartWindow, wopts.NoRestartWindow = *opts.RestartWindow, *opts.RestartWindow == 0
	}
	identities, err := workload.Open(ctx, system, wopts, log)
	if err != nil {
		return err
	}
	// One CRI client pre-pulls new images and tells when a replaced Pod
	// stopped.
	runtime := cri.New(opts.Root, log)
	sopts := staticpod.Options{Store: store, Cluster: cfg.Cluster, NodeGroup: cfg.NodeGroup, Root: opts.Root,
		Secrets: readers, Publisher: publisher, Log: log, Step: opts.Step, BucketExists: store.BucketExists,
		Prepull: runtime, Stopper: runtime}
	if identities != nil {
		sopts.Identity = identities
	}
	if co != nil {
		// Rolling updates and status reports go through coordination.
		sopts.Gate, sopts.Hooks.Deployments = coord, coord.DeploymentsChanged
	}
	rec, err := staticpod.New(sopts)
	if err != nil {
		return err
	}
	if opts.Once {
		return runOnce(ctx, rec, log)
	}
	deployments := coordinator.NewDeploymentStatus(rec, co)
	hl.SetDetail(deployments.Detail)
	m := health.NewMetrics(cfg.NodeGroup, append([]health.Source{rec, deployments}, co.MetricSources()...)...)
	hs := &health.Server{Addr: opts.HealthAddr, Health: hl, Metrics: m}
	lopts := staticpod.LoopOptions{Interval: opts.PollInterval, Health: hl}
	if co != nil {
		// While the leader's hints arrive, polling is only a safety net.
		lopts.Hinted, lopts.Vouched = coord.Hinted, coord.SafetyPoll
	}
	loop := staticpod.NewLoop(rec, lopts)

	// The components. Serving ones start first, in order, and stop last:
	// health, then (with coordination) Service DNS restored from the
	// durable snapshot, the dataplane, the coordinator and the leader's
	// discovery, then the registry. Reconcilers start after them and stop
	// first on SIGTERM.
	d := &daemon.Daemon{
		Serving:     []daemon.Component{hs},
		Reconcilers: []daemon.Component{daemon.Loop(staticpod.Component, loop.Run)},
		Health:      hl, TTLMargin: opts.TTLMargin, Log: log,
	}
	if co != nil {
		co.SetHint(loop.Hint)
		d.Serving = append(d.Serving, co.Serving()...)
	}
	if identities != nil {
		d.Reconcilers = append(d.Reconcilers, daemon.Loop("workload", func(ctx context.Context) error {
			return identities.Run(ctx, identityInterval, loop.IdentityChanged)
		}))
	}
	// Container log export follows the published cluster configuration;
	// its failures are named in /readyz and never hold Pods back.
	le := telemetry.NewExport(telemetry.ExportOptions{Cluster: cfg.Cluster, NodeGroup: cfg.NodeGroup, NodeID: opts.NodeID,
		Root: opts.Root, Local: localMode(cfg), Bucket: cfg.Bucket, Store: store, Readers: readers, Identities: identities,
		Health: hl, Restart: opts.RestartFluentBit, CARefreshInterval: opts.CARefreshInterval, Interval: identityInterval, Log: log,
		OpenBucket: func(ctx context.Context, name string) (objstore.Store, error) {
			other := place
			other.Bucket = name
			return provider.OpenBucket(ctx, other)
		}})
	d.Reconcilers = append(d.Reconcilers, daemon.Loop(telemetry.Component, le.Run))
	hs.Routes = map[string]http.Handler{telemetry.FluentBitConfigRoute: le}
	if b, ok := store.(*localstore.Bucket); ok {
		// A local bucket notifies its commits: reconcile within
		// milliseconds, with the poll as the correctness path.
		w := &staticpod.IndexWatcher{Bucket: b.Dir(), Changed: loop.Trigger, Log: log.With("component", "index-watcher")}
		d.Reconcilers = append(d.Reconcilers, daemon.Loop("index-watcher", w.Run))
	}
	if rs != nil {
		m.Add(health.Text{Src: rs.Handler()})
		d.Serving = append(d.Serving, rs)
	}
	if kubelet {
		// Local node mode watches a kubelet only when one serves its Pods
		// API beneath the root at startup. The node is not ready while
		// kubelet does not answer; Pods kubelet reports not ready are
		// diagnosed, and a full disk is named.
		hl.Report(componentKubelet, errors.New("kubelet's Pods API has not answered yet"))
		dopts := diagnose.Options{Root: opts.Root, Log: log.With("component", "diagnose"),
			Disk: func(err error) { hl.Report(componentDisk, err) }}
		if co != nil {
			dopts.Findings = coord.PodFindings
		}
		diag := diagnose.New(dopts)
		// Each complete Pod set gives the coordinator this node's ready
		// endpoints, hints the dataplane to refresh its interfaces and
		// feeds the diagnoser.
		kw := pods.NewKubelet(opts.Root, log, func(err error) { hl.Report(componentKubelet, err) },
			func(ps []*corev1.Pod) { co.PodsChanged(ps); diag.Update(ps) }, co.KubeletLost)
		d.Reconcilers = append(d.Reconcilers, daemon.Loop("pods", kw.Run), daemon.Loop("diagnose", diag.Run))
	}
	log.Info("podmin-agent starting", "root", opts.Root, "manifests", rec.ManifestsDir(), "health", opts.HealthAddr,
		"poll_interval", opts.PollInterval.String())
	d.Serving = append(d.Serving, daemon.Hook("started", func() {
		log.Info("serving health endpoints", "addr", hs.Bound())
		if opts.Started != nil {
			opts.Started(hs.Bound())
		}
	}))
	return d.Run(ctx)
}

// localMode reports whether the agent runs in local node mode.
func localMode(cfg Config) bool { return cfg.Provider == "local" }

// runOnce is the one-shot mode: a single reconcile pass (restarted while
// the index changes under it), then exit. It fails when anything, even one
// Pod, could not be published.
func runOnce(ctx context.Context, rec *staticpod.Reconciler, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	res, err := rec.Reconcile(ctx)
	if err != nil {
		return fmt.Errorf("one reconcile pass: %w", err)
	}
	log.Info("one reconcile pass done", "manifests", rec.ManifestsDir(), "pods", res.Pods, "written", res.Written,
		"removed", res.Removed, "etag", res.ETag)
	return nil
}
