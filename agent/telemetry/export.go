// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/agent/workload"
	"podmin.dev/podmin/internal/backoff"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/otellogs"
	"podmin.dev/podmin/internal/state"
)

// Container log export (setup --otel-logs): the node's Fluent Bit
// configuration, the exporter's private CA bundle and its client leaf.
const (
	// Component names log export in /readyz.
	Component = "log-export"
	// FluentBitConfigPath is the Fluent Bit configuration the agent
	// renders (mode 0600: it may hold exporter headers).
	FluentBitConfigPath = "/etc/podmin/fluent-bit.yaml"
	// Dir is the telemetry-owned tmpfs subtree: the CA bundle and the
	// client identity generations.
	Dir = "/run/podmin/telemetry"
	// DefaultFluentBitRestart restarts Fluent Bit on a cloud node.
	DefaultFluentBitRestart = "systemctl restart fluent-bit.service"
)

// ReadOtelLogs returns the cluster's --otel-logs value; a cluster without
// a published configuration exports nothing.
func ReadOtelLogs(ctx context.Context, store objstore.Store, cluster string) (string, error) {
	s, _, err := state.ReadClusterSettings(ctx, store, cluster)
	return s.OtelLogs, err
}

// ExportOptions are what log export needs of the node.
type ExportOptions struct {
	Cluster, NodeGroup string
	// NodeID names the node in the client identity; empty means the
	// host name.
	NodeID string
	// Root is the node root every host path hangs off.
	Root string
	// Local is set in local node mode: the headers secret is read from
	// the local secrets store, and by default nothing restarts Fluent Bit.
	Local bool
	// Bucket is the cluster bucket's name; Store reads it.
	Bucket string
	Store  objstore.Store
	// OpenBucket opens another bucket of the same provider, for a ca=
	// object outside the cluster bucket.
	OpenBucket func(ctx context.Context, name string) (objstore.Store, error)
	// Readers are the secrets providers by name, as the agent opened them.
	Readers map[string]mounts.Reader
	// Identities issues the client identity with mtls=true; nil without
	// the workload CA key.
	Identities *workload.Manager
	Health     *health.Health
	// Restart restarts Fluent Bit onto a new configuration, CA bundle or
	// identity; nil means DefaultFluentBitRestart on a cloud node and
	// nothing in local node mode.
	Restart func(ctx context.Context) error
	// CARefreshInterval is how often the CA bundle is fetched again; zero
	// means CARefreshInterval.
	CARefreshInterval time.Duration
	// Interval paces the configuration retries and the identity's
	// maintenance; zero means 30 s.
	Interval time.Duration
	Log      *slog.Logger
}

// Export keeps the node's log export material current. None of its
// failures stops Pod publication: they are logged and named in /readyz.
type Export struct {
	opts    ExportOptions
	health  *health.Health
	log     *slog.Logger
	restart func(context.Context) error

	mu   sync.Mutex
	errs map[string]error

	// cfgMu serialises configuration writes: the agent's own and those
	// Fluent Bit's unit asks for before it starts (ServeHTTP).
	cfgMu sync.Mutex
	// failed is set while the configuration could not be written or
	// Fluent Bit not restarted; every pass retries.
	failed bool
	// export is set once log export is configured.
	export *ConfigOptions
}

// FluentBitConfigRoute is the loopback health-server route Fluent Bit's
// unit POSTs to before every start (ExecStartPre): the agent reads the
// exporter headers secret afresh and rewrites the configuration, without
// restarting Fluent Bit.
const FluentBitConfigRoute = otellogs.FluentBitConfigRoute

// ServeHTTP serves FluentBitConfigRoute. It answers 503 while log export
// is not configured or the configuration cannot be written (so the unit
// does not start on a stale one), with the scrubbed reason.
func (l *Export) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST to rewrite the Fluent Bit configuration", http.StatusMethodNotAllowed)
		return
	}
	l.cfgMu.Lock()
	defer l.cfgMu.Unlock()
	if l.export == nil {
		http.Error(w, "container log export is not configured (yet): see the agent's /readyz", http.StatusServiceUnavailable)
		return
	}
	if err := l.write(r.Context()); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = fmt.Fprintln(w, "fluent-bit configuration written:", l.export.Path)
}

// write writes the configuration, reading the headers secret afresh.
// The caller holds cfgMu.
func (l *Export) write(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(l.export.Path), 0o755); err != nil {
		l.report("fluent-bit", err)
		return err
	}
	if err := WriteConfig(ctx, *l.export); err != nil {
		l.report("fluent-bit", err)
		return err
	}
	return nil
}

// lastFailed reports whether the last configuration write or restart
// failed.
func (l *Export) lastFailed() bool {
	l.cfgMu.Lock()
	defer l.cfgMu.Unlock()
	return l.failed
}

// NewExport returns the node's log export; Run starts it.
func NewExport(opts ExportOptions) *Export {
	if opts.Interval <= 0 {
		opts.Interval = 30 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	l := &Export{opts: opts, health: opts.Health, log: opts.Log.With("component", Component), restart: opts.Restart, errs: map[string]error{}}
	if l.restart == nil && !opts.Local {
		l.restart = CommandRestart(strings.Fields(DefaultFluentBitRestart))
	}
	return l
}

// CommandRestart runs argv to restart Fluent Bit.
func CommandRestart(argv []string) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
}

// path is a host path beneath the agent's root.
func (l *Export) path(p string) string { return filepath.Join(l.opts.Root, filepath.FromSlash(p)) }

// report records one part's outcome and publishes them all to health.
func (l *Export) report(part string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs[part] = err
	var all []error
	for _, p := range []string{"configuration", "ca", "identity", "fluent-bit"} {
		if l.errs[p] != nil {
			all = append(all, l.errs[p])
		}
	}
	l.health.Report(Component, errors.Join(all...))
}

// Run reads the setting (retrying until it can), then keeps the CA
// bundle, the identity and the configuration current until ctx ends.
func (l *Export) Run(ctx context.Context) error {
	retry := time.NewTicker(l.opts.Interval)
	var value string
	for {
		var err error
		if value, err = ReadOtelLogs(ctx, l.opts.Store, l.opts.Cluster); err == nil {
			break
		}
		l.log.Warn("container log export waits for the cluster configuration", "err", err)
		l.report("configuration", err)
		select {
		case <-ctx.Done():
			return nil
		case <-retry.C:
		}
	}
	retry.Stop()
	l.report("configuration", nil)
	if value == "" {
		l.log.Info("container log export disabled by the cluster configuration")
		return nil
	}
	o, err := otellogs.Parse(value)
	if err != nil {
		l.log.Error("container log export disabled: invalid --otel-logs in the cluster configuration", "err", err)
		l.report("configuration", err)
		return nil
	}
	l.log.Info("container log export enabled", "endpoint", o.Endpoint.String(), "protocol", o.Protocol, "mtls", o.MTLS,
		"ca", o.CA, "headers", o.HeadersSecret)
	if err := l.setup(ctx, o); err != nil {
		l.log.Error("container log export not started", "err", err)
		l.report("configuration", err)
		return nil
	}
	var ca *CABundle
	if bucket, key, ok := o.CABucketKey(); ok {
		ca = NewCABundle(CABundleOptions{
			Fetch: l.fetchCA(bucket, key), Path: l.caFile(), Logger: l.log,
		})
		// The first configuration write below restarts Fluent Bit when
		// anything changed.
		_, err := ca.Refresh(ctx)
		l.report("ca", err)
	}
	if id := l.identity(); id != nil {
		if _, err := id.Current(); err != nil {
			// The first identity pass writes the configuration through
			// the restart hook.
			l.report("fluent-bit", errors.New("waiting for the telemetry identity"))
		} else {
			_ = l.apply(ctx, false, "agent start")
		}
	} else {
		_ = l.apply(ctx, false, "agent start")
	}
	caEvery := l.opts.CARefreshInterval
	if caEvery <= 0 {
		caEvery = CARefreshInterval
	}
	caTick := time.NewTicker(caEvery)
	defer caTick.Stop()
	// The identity is maintained at once (a renewal restarts Fluent Bit
	// through the hook), then every l.opts.Interval; a failure, such as
	// a workload CA not read yet, is retried sooner with backoff.
	idTimer := time.NewTimer(0)
	defer idTimer.Stop()
	idRetry := backoff.Policy{Min: 250 * time.Millisecond, Max: l.opts.Interval}
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-caTick.C:
			if l.lastFailed() {
				_ = l.apply(ctx, true, "retrying the last failure")
			}
			if ca != nil {
				changed, err := ca.Refresh(ctx)
				l.report("ca", err)
				if changed {
					_ = l.apply(ctx, true, "new CA bundle")
				}
			}
		case <-idTimer.C:
			id := l.identity()
			if id == nil {
				continue
			}
			_, err := id.Maintain(ctx)
			l.report("identity", err)
			if err == nil && l.lastFailed() {
				_ = l.apply(ctx, true, "retrying the last failure")
			}
			next := l.opts.Interval
			if err != nil {
				failures++
				next = idRetry.Delay(failures)
			} else {
				failures = 0
			}
			idTimer.Reset(next)
		}
	}
}

// setup assembles the configuration inputs and, with mtls=true, the
// telemetry identity.
func (l *Export) setup(ctx context.Context, o otellogs.Options) error {
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("node hostname: %w", err)
	}
	nodeID := l.opts.NodeID
	if nodeID == "" {
		nodeID = host
	}
	def := otellogs.DefaultPaths()
	export := ConfigOptions{
		Options: o,
		Node:    otellogs.Node{Cluster: l.opts.Cluster, NodeGroup: l.opts.NodeGroup, Hostname: host},
		Paths:   otellogs.Paths{StateDir: l.path(def.StateDir), CAFile: l.path(filepath.Join(Dir, "ca.pem"))},
		Headers: l.readHeaders,
		Path:    l.path(FluentBitConfigPath),
		Logger:  l.log,
	}
	if !o.MTLS {
		l.setExport(export)
		return nil
	}
	if l.opts.Identities == nil {
		return errors.New("mtls=true needs the workload CA, which this agent has not got: run podmin setup, then restart the agent")
	}
	id, err := NewIdentity(IdentityOptions{
		Dir: l.path(Dir), Cluster: l.opts.Cluster, NodeID: nodeID, Issuer: l.opts.Identities,
		UID: -1, GID: -1, Logger: l.log,
		Restart: func(ctx context.Context) error { return l.apply(ctx, true, "telemetry identity renewed") },
	})
	if err != nil {
		return err
	}
	export.Identity = id
	l.setExport(export)
	return nil
}

func (l *Export) setExport(o ConfigOptions) {
	l.cfgMu.Lock()
	defer l.cfgMu.Unlock()
	l.export = &o
}

// identity returns the telemetry identity, nil without mtls.
func (l *Export) identity() *Identity {
	l.cfgMu.Lock()
	defer l.cfgMu.Unlock()
	return l.export.Identity
}

func (l *Export) caFile() string {
	l.cfgMu.Lock()
	defer l.cfgMu.Unlock()
	return l.export.Paths.CAFile
}
