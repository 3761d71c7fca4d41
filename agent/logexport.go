// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

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
	"podmin.dev/podmin/agent/telemetry"
	"podmin.dev/podmin/agent/workload"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/otellogs"
	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/state"
)

// Container log export (setup --otel-logs): the node's Fluent Bit
// configuration, the exporter's private CA bundle and its client leaf.
const (
	componentLogExport = "log-export"
	// FluentBitConfigPath is the Fluent Bit configuration the agent
	// renders (mode 0600: it may hold exporter headers).
	FluentBitConfigPath = "/etc/podmin/fluent-bit.yaml"
	// TelemetryDir is the telemetry-owned tmpfs subtree: the CA bundle and
	// the client identity generations.
	TelemetryDir = "/run/podmin/telemetry"
	// DefaultFluentBitRestart restarts Fluent Bit on a cloud node.
	DefaultFluentBitRestart = "systemctl restart fluent-bit.service"
)

// readOtelLogs returns the cluster's --otel-logs value; a cluster without
// a published configuration exports nothing.
func readOtelLogs(ctx context.Context, store objstore.Store, cluster string) (string, error) {
	s, _, err := state.ReadClusterSettings(ctx, store, cluster)
	return s.OtelLogs, err
}

// logExport keeps the node's log export material current. None of its
// failures stops Pod publication: they are logged and named in /readyz.
type logExport struct {
	cfg        Config
	opts       Options
	store      objstore.Bucket
	readers    map[string]mounts.Reader // the secrets providers, as Run opened them
	identities *workload.Manager        // nil without the workload CA key
	health     *health.Health
	log        *slog.Logger
	restart    func(context.Context) error

	mu   sync.Mutex
	errs map[string]error

	// cfgMu serialises configuration writes: the agent's own and those
	// Fluent Bit's unit asks for before it starts (ServeHTTP).
	cfgMu sync.Mutex
	// failed is set while the configuration could not be written or
	// Fluent Bit not restarted; every pass retries.
	failed bool
	// export is set once log export is configured.
	export *telemetry.ConfigOptions
}

// FluentBitConfigRoute is the loopback health-server route Fluent Bit's
// unit POSTs to before every start (ExecStartPre): the agent reads the
// exporter headers secret afresh and rewrites the configuration, without
// restarting Fluent Bit.
const FluentBitConfigRoute = otellogs.FluentBitConfigRoute

// ServeHTTP serves FluentBitConfigRoute. It answers 503 while log export
// is not configured or the configuration cannot be written (so the unit
// does not start on a stale one), with the scrubbed reason.
func (l *logExport) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
func (l *logExport) write(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(l.export.Path), 0o755); err != nil {
		l.report("fluent-bit", err)
		return err
	}
	if err := telemetry.WriteConfig(ctx, *l.export); err != nil {
		l.report("fluent-bit", err)
		return err
	}
	return nil
}

// lastFailed reports whether the last configuration write or restart
// failed.
func (l *logExport) lastFailed() bool {
	l.cfgMu.Lock()
	defer l.cfgMu.Unlock()
	return l.failed
}

func newLogExport(cfg Config, opts Options, store objstore.Bucket, readers map[string]mounts.Reader, identities *workload.Manager, health *health.Health, log *slog.Logger) *logExport {
	l := &logExport{cfg: cfg, opts: opts, store: store, readers: readers, identities: identities, health: health,
		log: log.With("component", componentLogExport), restart: opts.RestartFluentBit, errs: map[string]error{}}
	if l.restart == nil && cfg.Provider != "local" {
		l.restart = commandRestart(strings.Fields(DefaultFluentBitRestart))
	}
	return l
}

// commandRestart runs argv to restart Fluent Bit.
func commandRestart(argv []string) func(context.Context) error {
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
func (l *logExport) path(p string) string { return filepath.Join(l.opts.Root, filepath.FromSlash(p)) }

// report records one part's outcome and publishes them all to health.
func (l *logExport) report(part string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs[part] = err
	var all []error
	for _, p := range []string{"configuration", "ca", "identity", "fluent-bit"} {
		if l.errs[p] != nil {
			all = append(all, l.errs[p])
		}
	}
	l.health.Report(componentLogExport, errors.Join(all...))
}

// run reads the setting (retrying until it can), then keeps the CA
// bundle, the identity and the configuration current until ctx ends.
func (l *logExport) run(ctx context.Context) error {
	retry := time.NewTicker(identityInterval)
	var value string
	for {
		var err error
		if value, err = readOtelLogs(ctx, l.store, l.cfg.Cluster); err == nil {
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
	var ca *telemetry.CABundle
	if bucket, key, ok := o.CABucketKey(); ok {
		ca = telemetry.NewCABundle(telemetry.CABundleOptions{
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
		caEvery = telemetry.CARefreshInterval
	}
	caTick := time.NewTicker(caEvery)
	defer caTick.Stop()
	// The identity is maintained at once (a renewal restarts Fluent Bit
	// through the hook), then every identityInterval; a failure, such as
	// a workload CA not read yet, is retried sooner with backoff.
	idTimer := time.NewTimer(0)
	defer idTimer.Stop()
	backoff := time.Duration(0)
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
			next := identityInterval
			if err != nil {
				backoff = min(max(2*backoff, 250*time.Millisecond), identityInterval)
				next = backoff
			} else {
				backoff = 0
			}
			idTimer.Reset(next)
		}
	}
}

// setup assembles the configuration inputs and, with mtls=true, the
// telemetry identity.
func (l *logExport) setup(ctx context.Context, o otellogs.Options) error {
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("node hostname: %w", err)
	}
	nodeID := l.opts.NodeID
	if nodeID == "" {
		nodeID = host
	}
	def := otellogs.DefaultPaths()
	export := telemetry.ConfigOptions{
		Options: o,
		Node:    otellogs.Node{Cluster: l.cfg.Cluster, NodeGroup: l.cfg.NodeGroup, Hostname: host},
		Paths:   otellogs.Paths{StateDir: l.path(def.StateDir), CAFile: l.path(filepath.Join(TelemetryDir, "ca.pem"))},
		Headers: l.readHeaders,
		Path:    l.path(FluentBitConfigPath),
		Logger:  l.log,
	}
	if !o.MTLS {
		l.setExport(export)
		return nil
	}
	if l.identities == nil {
		return errors.New("mtls=true needs the workload CA, which this agent has not got: run podmin setup, then restart the agent")
	}
	id, err := telemetry.NewIdentity(telemetry.IdentityOptions{
		Dir: l.path(TelemetryDir), Cluster: l.cfg.Cluster, NodeID: nodeID, Issuer: l.identities,
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

func (l *logExport) setExport(o telemetry.ConfigOptions) {
	l.cfgMu.Lock()
	defer l.cfgMu.Unlock()
	l.export = &o
}

// identity returns the telemetry identity, nil without mtls.
func (l *logExport) identity() *telemetry.Identity {
	l.cfgMu.Lock()
	defer l.cfgMu.Unlock()
	return l.export.Identity
}

func (l *logExport) caFile() string {
	l.cfgMu.Lock()
	defer l.cfgMu.Unlock()
	return l.export.Paths.CAFile
}

// apply writes the configuration and restarts Fluent Bit when force is
// set or the configuration changed.
func (l *logExport) apply(ctx context.Context, force bool, why string) (err error) {
	defer func() {
		l.cfgMu.Lock()
		l.failed = err != nil
		l.cfgMu.Unlock()
	}()
	changed, err := l.rewrite(ctx)
	if err != nil {
		return err
	}
	if !force && !changed {
		l.report("fluent-bit", nil)
		return nil
	}
	if l.restart == nil {
		l.log.Info("fluent-bit configuration current; no restart configured", "reason", why)
		l.report("fluent-bit", nil)
		return nil
	}
	// The restart runs without cfgMu: the unit's ExecStartPre asks this
	// agent to write the configuration (ServeHTTP) while systemctl waits.
	if err := l.restart(ctx); err != nil {
		err = fmt.Errorf("restart Fluent Bit (%s): %w", why, err)
		l.log.Error("fluent-bit not restarted", "err", err)
		l.report("fluent-bit", err)
		return err
	}
	l.log.Info("fluent-bit restarted", "reason", why)
	l.report("fluent-bit", nil)
	return nil
}

// rewrite writes the configuration and reports whether it changed.
func (l *logExport) rewrite(ctx context.Context) (bool, error) {
	l.cfgMu.Lock()
	defer l.cfgMu.Unlock()
	before, _ := os.ReadFile(l.export.Path)
	if err := l.write(ctx); err != nil {
		return false, err
	}
	after, _ := os.ReadFile(l.export.Path)
	return !bytes.Equal(before, after), nil
}

// fetchCA reads the exact ca= object: from the cluster bucket itself when
// it names it, otherwise from that bucket of the same provider.
func (l *logExport) fetchCA(bucket, key string) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		var b objstore.Store = l.store
		if bucket != l.cfg.Bucket {
			c := l.cfg
			c.Bucket = bucket
			ob, err := openStore(ctx, c, l.opts)
			if err != nil {
				return nil, err
			}
			b = ob
		}
		return telemetry.FetchObject(b, key)(ctx)
	}
}

// readHeaders reads /<cluster>/_system/otel-logs-headers: from the local
// secrets store, or on AWS from Parameter Store and then Secrets Manager.
func (l *logExport) readHeaders(ctx context.Context) ([]byte, error) {
	name, err := secrets.SystemSecret(l.cfg.Cluster, secrets.OtelLogsHeaders)
	if err != nil {
		return nil, err
	}
	if l.cfg.Provider == "local" {
		r, ok := l.readers[secrets.Local]
		if !ok {
			return nil, errors.New("the Podmin data directory holding the local secrets store is unknown; set XDG_DATA_HOME")
		}
		return r.Get(ctx, name.String())
	}
	var errs []error
	for _, provider := range []string{secrets.ParameterStore, secrets.SecretsManager} {
		v, err := l.readers[provider].Get(ctx, name.String())
		if err == nil {
			return v, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", provider, err))
	}
	return nil, errors.Join(errs...)
}
