// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"podmin.dev/podmin/agent/coordinator"
	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/agent/registry"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/agent/telemetry"
	"podmin.dev/podmin/agent/workload"
)

// Environment variables that relocate or pace the agent. They are not
// configuration of a node (the six flags are): they exist so tests and the
// local node mode run unprivileged in a directory.
const (
	// EnvRoot relocates every host path (default "/").
	EnvRoot = "PODMIN_ROOT"
	// EnvHealthAddr moves the loopback health endpoints.
	EnvHealthAddr = "PODMIN_AGENT_HEALTH_ADDR"
	// EnvRegistryAddr moves the loopback read-only registry (default
	// 127.0.0.1:5000); "off" disables it.
	EnvRegistryAddr = "PODMIN_AGENT_REGISTRY_ADDR"
	// EnvPollInterval sets the index poll period (a Go duration).
	EnvPollInterval = "PODMIN_AGENT_POLL_INTERVAL"
	// EnvOnce, set to 1, runs one reconcile pass and exits: 0 when the
	// NodeGroup's desired state is published, 1 otherwise.
	EnvOnce = "PODMIN_AGENT_ONCE"
	// EnvTTLMargin sets the wait between stopping reconciliation and
	// exiting on SIGTERM (a Go duration).
	EnvTTLMargin = "PODMIN_AGENT_DNS_TTL_MARGIN"
	// EnvDNSAddr, EnvAPIAddr, EnvNodeID, EnvNodeAddr, EnvDataplane and
	// EnvDrain place the node in cluster coordination (package coordinator).
	EnvDNSAddr   = coordinator.EnvDNSAddr
	EnvAPIAddr   = coordinator.EnvAPIAddr
	EnvNodeID    = coordinator.EnvNodeID
	EnvNodeAddr  = coordinator.EnvNodeAddr
	EnvDataplane = coordinator.EnvDataplane
	EnvDrain     = coordinator.EnvDrain
	// EnvFluentBitRestart is the command that restarts Fluent Bit when
	// its configuration, CA bundle or client identity changes (default on
	// a cloud node: telemetry.DefaultFluentBitRestart; in local node mode none);
	// "off" restarts nothing.
	EnvFluentBitRestart = "PODMIN_AGENT_FLUENT_BIT_RESTART"
	// EnvRestartWindow spreads the Pod restarts that new workload leaves
	// cause over this window (a Go duration, default 30m, at most 5h; 0
	// restarts at once): each Pod restarts at a point derived from its
	// NodeGroup, node ID and name.
	EnvRestartWindow = "PODMIN_AGENT_RESTART_WINDOW"
)

// Dataplane settings of Options.Dataplane.
const (
	DataplaneAuto = coordinator.DataplaneAuto
	DataplaneOn   = coordinator.DataplaneOn
	DataplaneOff  = coordinator.DataplaneOff
)

// Defaults of Options.
const (
	DefaultPollInterval = staticpod.DefaultInterval
	DefaultTTLMargin    = 5 * time.Second
)

// Options are the agent's settings that are not node configuration.
type Options struct {
	// Root is the node root every host path hangs off.
	Root string
	// HealthAddr is the loopback address of /healthz and /readyz.
	HealthAddr string
	// RegistryAddr is the loopback address of the read-only OCI registry;
	// empty serves none.
	RegistryAddr string
	// PollInterval is the index poll period.
	PollInterval time.Duration
	// TTLMargin is the SIGTERM wait for DNS caches to expire.
	TTLMargin time.Duration
	// DataDir is the Podmin data directory, where the local provider keeps
	// named buckets and secrets.
	DataDir string
	// Log receives the agent's structured log.
	Log *slog.Logger
	// Publisher also receives the Service desired state (tests); without
	// coordination, nil records it in memory.
	Publisher staticpod.Publisher
	// Step is passed to the reconciler (fault injection in tests).
	Step func(step staticpod.Step, file string) error
	// Once runs one reconcile pass and returns its outcome, serving
	// nothing.
	Once bool
	// RestartFluentBit restarts Fluent Bit onto a new configuration,
	// CA bundle or client identity (container log export); nil means
	// telemetry.DefaultFluentBitRestart on a cloud node and nothing in local node
	// mode.
	RestartFluentBit func(ctx context.Context) error
	// CARefreshInterval is how often the exporter CA bundle is fetched
	// again; zero means every five minutes.
	CARefreshInterval time.Duration
	// Started, when set, is called with the health server's bound address
	// once every component runs.
	Started func(healthAddr string)
	// RestartWindow spreads the restarts of Pods whose workload leaf is
	// replaced (workload.Options.RestartWindow); nil means the default.
	RestartWindow *time.Duration
	// Settings are the node's coordination settings: Service DNS, the
	// coordination API, the node's identity, the dataplane and rollouts.
	coordinator.Settings
}

// OptionsFromEnv reads the environment variables above; unset ones get
// defaults.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	settings, err := coordinator.SettingsFromEnv(getenv)
	o := Options{Root: "/", HealthAddr: health.DefaultAddr, RegistryAddr: registry.DefaultAddress,
		PollInterval: DefaultPollInterval, TTLMargin: DefaultTTLMargin, Settings: settings}
	errs := []error{err}
	if v := getenv(EnvRoot); v != "" {
		if !filepath.IsAbs(v) {
			errs = append(errs, fmt.Errorf("%s=%q is not an absolute path: point it at the directory standing in for /", EnvRoot, v))
		}
		o.Root = filepath.Clean(v)
	}
	if v := getenv(EnvHealthAddr); v != "" {
		if err := health.CheckLoopback("health", v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvHealthAddr, err))
		}
		o.HealthAddr = v
	}
	switch v := getenv(EnvRegistryAddr); v {
	case "":
	case "off":
		o.RegistryAddr = ""
	default:
		if err := health.CheckLoopback("registry", v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvRegistryAddr, err))
		}
		o.RegistryAddr = v
	}
	switch v := getenv(EnvFluentBitRestart); v {
	case "":
	case "off":
		o.RestartFluentBit = func(context.Context) error { return nil }
	default:
		argv := strings.Fields(v)
		if len(argv) == 0 {
			errs = append(errs, fmt.Errorf("%s=%q names no command: use e.g. %q, or off", EnvFluentBitRestart, v, telemetry.DefaultFluentBitRestart))
			break
		}
		o.RestartFluentBit = telemetry.CommandRestart(argv)
	}
	duration := func(name string, min time.Duration, dst *time.Duration) {
		v := getenv(name)
		if v == "" {
			return
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < min {
			errs = append(errs, fmt.Errorf("%s=%q is not a duration of at least %s, such as 10s", name, v, min))
			return
		}
		*dst = d
	}
	switch v := getenv(EnvOnce); v {
	case "", "0", "false":
	case "1", "true":
		o.Once = true
	default:
		errs = append(errs, fmt.Errorf("%s=%q is not 1 or 0", EnvOnce, v))
	}
	duration(EnvPollInterval, time.Millisecond, &o.PollInterval)
	duration(EnvTTLMargin, 0, &o.TTLMargin)
	if v := getenv(EnvRestartWindow); v != "" {
		d, err := time.ParseDuration(v)
		if err == nil {
			err = workload.CheckRestartWindow(d)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %v: give a duration such as 30m, or 0 to restart at once", EnvRestartWindow, v, err))
		} else {
			o.RestartWindow = &d
		}
	}
	return o, errors.Join(errs...)
}
