// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"podmin.dev/podmin/agent/registry"
	"podmin.dev/podmin/agent/staticpod"
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
	// Publisher receives the Service desired state; nil records it in
	// memory until the coordinator exists.
	Publisher staticpod.Publisher
	// Step is passed to the reconciler (fault injection in tests).
	Step func(step staticpod.Step, file string) error
	// Once runs one reconcile pass and returns its outcome, serving
	// nothing.
	Once bool
	// Started, when set, is called with the health server's bound address
	// once every component runs.
	Started func(healthAddr string)
}

// OptionsFromEnv reads the environment variables above; unset ones get
// defaults.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	o := Options{Root: "/", HealthAddr: DefaultHealthAddr, RegistryAddr: registry.DefaultAddress,
		PollInterval: DefaultPollInterval, TTLMargin: DefaultTTLMargin}
	var errs []error
	if v := getenv(EnvRoot); v != "" {
		if !filepath.IsAbs(v) {
			errs = append(errs, fmt.Errorf("%s=%q is not an absolute path: point it at the directory standing in for /", EnvRoot, v))
		}
		o.Root = filepath.Clean(v)
	}
	if v := getenv(EnvHealthAddr); v != "" {
		if err := checkLoopback(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvHealthAddr, err))
		}
		o.HealthAddr = v
	}
	switch v := getenv(EnvRegistryAddr); v {
	case "":
	case "off":
		o.RegistryAddr = ""
	default:
		if err := checkLoopback(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvRegistryAddr, err))
		}
		o.RegistryAddr = v
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
	return o, errors.Join(errs...)
}
