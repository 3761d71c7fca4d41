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
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/agent/cri"
	"podmin.dev/podmin/agent/daemon"
	"podmin.dev/podmin/agent/diagnose"
	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/agent/identity"
	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/agent/pods"
	"podmin.dev/podmin/agent/registry"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/agent/telemetry"
	"podmin.dev/podmin/agent/workload"
	"podmin.dev/podmin/internal/cloud"
	awscloud "podmin.dev/podmin/internal/cloud/aws"
	cloudlocal "podmin.dev/podmin/internal/cloud/local"
	"podmin.dev/podmin/internal/objstore"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/secrets"
	secretslocal "podmin.dev/podmin/internal/secrets/local"
)

// openStore opens the cluster bucket read-side.
func openStore(ctx context.Context, cfg Config, opts Options) (objstore.Bucket, error) {
	var p cloud.Provider = awscloud.Provider{}
	if cfg.Provider == "local" {
		if opts.DataDir == "" && !filepath.IsAbs(cfg.Bucket) {
			return nil, fmt.Errorf("--bucket %q is a name, but the Podmin data directory is unknown: pass an absolute directory or set XDG_DATA_HOME", cfg.Bucket)
		}
		p = cloudlocal.New(opts.DataDir)
	}
	if err := p.ValidateBucketName(cfg.Bucket); err != nil {
		return nil, fmt.Errorf("--bucket: %w", err)
	}
	b, err := p.OpenBucket(ctx, cloud.BucketRef{Bucket: cfg.Bucket, Region: cfg.Region})
	if err != nil {
		return nil, fmt.Errorf("open bucket %s: %w", cfg.Bucket, err)
	}
	return b, nil
}

// secretReaders returns the providers whose values this node can mount.
func secretReaders(ctx context.Context, cfg Config, opts Options) (map[string]mounts.Reader, error) {
	readers := map[string]mounts.Reader{}
	if cfg.Provider == "local" {
		if opts.DataDir != "" {
			readers[secrets.Local] = mounts.StoreReader{Store: secretslocal.New(filepath.Join(opts.DataDir, "secrets"))}
		}
		return readers, nil
	}
	for _, name := range []string{secrets.ParameterStore, secrets.SecretsManager} {
		s, err := awscloud.OpenSecrets(ctx, name, awscloud.SecretsOptions{Region: cfg.Region})
		if err != nil {
			return nil, err
		}
		readers[name] = mounts.StoreReader{Store: s}
	}
	return readers, nil
}

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
	store, err := openStore(ctx, cfg, opts)
	if err != nil {
		return err
	}
	readers, err := secretReaders(ctx, cfg, opts)
	if err != nil {
		return err
	}
	system, err := systemSecrets(ctx, cfg, opts)
	if err != nil {
		return err
	}
	publisher := opts.Publisher
	if publisher == nil {
		publisher = &staticpod.Recorder{}
	}
	hl := health.NewHealth(staticpod.Component)
	// Coordination (node identity, coordinator, Service DNS, dataplane)
	// serves only a running agent; a one-shot pass publishes Pods alone.
	var co *coordination
	if !opts.Once {
		if co, err = newCoordination(ctx, cfg, opts, system, store, hl, log); err != nil {
			return err
		}
	}
	// Only the elected agent creates or rotates identity/ca.json: an agent
	// without coordination never does, and a one-shot pass only when it
	// wins the lease for its pass.
	var leader workload.Leader = workload.Never{}
	if co != nil {
		publisher = co.publisher(opts.Publisher)
		leader = co.coord.Elector()
	}
	node := opts.NodeID
	if co != nil {
		node = co.nodeID
	}
	if opts.Once {
		once, err := newOnceLeadership(ctx, node, store, log)
		if err != nil {
			return err
		}
		defer once.end()
		leader = once
	}
	identities, err := workloadIdentities(ctx, cfg, opts, node, system, store, leader, log)
	if err != nil {
		return err
	}
	sopts := staticpod.Options{
		Store: store, Cluster: cfg.Cluster, NodeGroup: cfg.NodeGroup, Root: opts.Root,
		Secrets: readers, Publisher: publisher, Log: log, Step: opts.Step,
		BucketExists: store.BucketExists,
	}
	// One CRI client pre-pulls new images and tells when a replaced Pod
	// stopped.
	cri := cri.New(opts.Root, log)
	sopts.Prepull, sopts.Stopper = cri, cri
	if identities != nil {
		sopts.Identity = identities
	}
	if co != nil {
		// Rolling updates and status reports go through coordination.
		sopts.Gate, sopts.Hooks.Deployments = co.coord, co.coord.DeploymentsChanged
	}
	rec, err := staticpod.New(sopts)
	if err != nil {
		return err
	}
	if opts.Once {
		return runOnce(ctx, rec, log)
	}
	deployments := deploymentReports(rec, co)
	hl.SetDetail(deployments.detail)
	m := health.NewMetrics(cfg.NodeGroup, append([]health.Source{rec, deployments}, co.metricSources()...)...)
	hs := &health.Server{Addr: opts.HealthAddr, Health: hl, Metrics: m}
	lopts := staticpod.LoopOptions{Interval: opts.PollInterval, Health: hl}
	if co != nil {
		// While the leader's hints arrive, polling is only a safety net.
		lopts.Hinted, lopts.Vouched = co.coord.Hinted, co.coord.SafetyPoll
	}
	loop := staticpod.NewLoop(rec, lopts)
	d := &daemon.Daemon{
		Serving:     []daemon.Component{hs},
		Reconcilers: []daemon.Component{daemon.Loop(staticpod.Component, loop.Run)},
		Health:      hl, TTLMargin: opts.TTLMargin, Log: log,
	}
	if co != nil {
		// Startup order: durable Service DNS is restored and served and
		// the leader discovered before the NodeGroup is reconciled.
		co.hint = loop.Hint
		d.Serving = append(d.Serving, co.serving(hl)...)
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
			c := cfg
			c.Bucket = name
			return openStore(ctx, c, opts)
		}})
	d.Reconcilers = append(d.Reconcilers, daemon.Loop(telemetry.Component, le.Run))
	hs.Routes = map[string]http.Handler{telemetry.FluentBitConfigRoute: le}
	if b, ok := store.(*localstore.Bucket); ok {
		// A local bucket notifies its commits: reconcile within
		// milliseconds, with the poll as the correctness path.
		w := &staticpod.IndexWatcher{Bucket: b.Dir(), Changed: loop.Trigger, Log: log.With("component", "index-watcher")}
		d.Reconcilers = append(d.Reconcilers, daemon.Loop("index-watcher", w.Run))
	}
	if opts.RegistryAddr != "" {
		rs := registry.NewServer(opts.RegistryAddr, EnvRegistryAddr, store, log)
		m.Add(health.Text{Src: rs.Handler()})
		d.Serving = append(d.Serving, rs)
	}
	if cfg.Provider != "local" || kubeletSocketExists(opts.Root) {
		// Local node mode watches a kubelet only when one serves its Pods
		// API beneath the root at startup. The node is not ready while
		// kubelet does not answer; Pods kubelet reports not ready are
		// diagnosed, and a full disk is named.
		hl.Report(componentKubelet, errors.New("kubelet's Pods API has not answered yet"))
		dopts := diagnose.Options{Root: opts.Root, Log: log.With("component", "diagnose"),
			Disk: func(err error) { hl.Report(componentDisk, err) }}
		if co != nil {
			dopts.Findings = co.coord.PodFindings
		}
		diag := diagnose.New(dopts)
		d.Reconcilers = append(d.Reconcilers, kubeletWatcher(opts, co, hl, diag, log), daemon.Loop("diagnose", diag.Run))
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

// identityInterval is how often the agent re-reads identity/ca.json and
// checks its leaves for renewal.
const identityInterval = 30 * time.Second

// systemSecrets opens the provider's system secrets store, where setup
// keeps the cluster CA and the workload CA key; nil when the local data
// directory is unknown.
func systemSecrets(ctx context.Context, cfg Config, opts Options) (identity.SecretReader, error) {
	if localMode(cfg) {
		if opts.DataDir == "" {
			return nil, nil
		}
		return secretslocal.New(filepath.Join(opts.DataDir, "secrets")), nil
	}
	return awscloud.OpenSecrets(ctx, secrets.ParameterStore, awscloud.SecretsOptions{Region: cfg.Region})
}

// workloadIdentities returns the workload identity manager, reading the
// workload CA key from r, the provider's system store. A cluster whose key
// does not exist yet (podmin setup has not run) gets no identities: the
// agent still publishes Pods and says how to fix it; every other failure
// to read the key stops the agent.
func workloadIdentities(ctx context.Context, cfg Config, opts Options, node string, r workload.KeyReader, store objstore.Store, leader workload.Leader, log *slog.Logger) (*workload.Manager, error) {
	if r == nil {
		log.Warn("workload identities disabled: the Podmin data directory holding the local secrets store is unknown; set XDG_DATA_HOME")
		return nil, nil
	}
	key, err := workload.ReadKey(ctx, r, cfg.Cluster)
	if errors.Is(err, secrets.ErrNotFound) {
		log.Warn("workload identities disabled until the agent restarts: the cluster has no workload CA key yet", "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if node == "" {
		if node, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("node ID: %w: set %s", err, EnvNodeID)
		}
	}
	wopts := workload.Options{
		Store: store, Cluster: cfg.Cluster, Root: opts.Root, Key: key,
		Leader: leader, NodeGroup: cfg.NodeGroup, Node: node,
		Log: log.With("component", "workload"),
	}
	if opts.RestartWindow != nil {
		wopts.RestartWindow, wopts.NoRestartWindow = *opts.RestartWindow, *opts.RestartWindow == 0
	}
	return workload.New(wopts)
}

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

// onceLeadership is the election of a one-shot pass, which takes no part
// in coordination: the first time the workload CA asks whether it leads,
// it campaigns once (election.Elector.Campaign: it takes the lease only
// when it is missing, vacant or an earlier pass's own, never while another
// agent leads), and it resigns when the pass ends. A pass that never
// needs the CA never touches the lease.
type onceLeadership struct {
	ctx   context.Context
	el    *election.Elector
	log   *slog.Logger
	once  sync.Once
	leads bool
}

func newOnceLeadership(ctx context.Context, node string, store objstore.Bucket, log *slog.Logger) (*onceLeadership, error) {
	if node == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("node ID: %w: set %s", err, EnvNodeID)
		}
		node = h
	}
	el, err := election.New(election.Options{ID: node, Store: store, Log: log.With("component", "election")})
	if err != nil {
		return nil, err
	}
	return &onceLeadership{ctx: ctx, el: el, log: log}, nil
}

// IsLeader implements workload.Leader.
func (o *onceLeadership) IsLeader() bool {
	o.once.Do(func() {
		o.leads = o.el.Campaign(o.ctx)
		if !o.leads {
			o.log.Info("another agent leads, or the lease is unreadable: this pass does not create or rotate the workload CA")
		}
	})
	return o.leads && o.el.IsLeader()
}

// end resigns the lease the pass won.
func (o *onceLeadership) end() { o.el.Resign() }

// kubeletSocketExists reports whether kubelet's Pods API socket exists
// beneath root.
func kubeletSocketExists(root string) bool {
	fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(pods.SocketPath)))
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// Health components the kubelet watcher and the diagnoser report under.
const (
	componentKubelet = "kubelet"
	componentDisk    = "disk"
)

// kubeletWatcher follows kubelet's Pods API: each complete Pod set gives
// the coordinator this node's ready endpoints, hints the dataplane to
// refresh its interfaces and feeds the diagnoser; a kubelet that stops
// answering makes the node not ready until it answers again.
func kubeletWatcher(opts Options, co *coordination, hl *health.Health, diag *diagnose.Diagnoser, log *slog.Logger) daemon.Component {
	wopts := pods.Options{
		Socket: filepath.Join(opts.Root, filepath.FromSlash(pods.SocketPath)),
		Log:    log.With("component", "pods"),
		Refresh: func(ps []*corev1.Pod) {
			ready := 0
			for _, p := range ps {
				if pods.IsReady(p) {
					ready++
				}
			}
			log.Debug("kubelet Pods refreshed", "pods", len(ps), "ready", ready)
			hl.Report(componentKubelet, nil)
			if co != nil {
				co.podsChanged(ps)
			}
			diag.Update(ps)
		},
		Lost: func(err error) {
			hl.Report(componentKubelet, fmt.Errorf("kubelet is down: its Pods API at %s does not answer: %w: check kubelet (systemctl status kubelet)",
				pods.SocketPath, err))
			if co != nil {
				co.coord.KubeletLost(err) // readiness is unknown until kubelet answers again
			}
		},
	}
	return daemon.Loop("pods", pods.New(wopts).Run)
}
