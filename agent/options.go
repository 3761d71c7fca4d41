// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/agent/registry"
	"podmin.dev/podmin/agent/service"
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
	// EnvDNSAddr moves the loopback Service DNS listener (UDP and TCP,
	// default 127.0.0.1:1053); "off" serves no Service DNS.
	EnvDNSAddr = "PODMIN_AGENT_DNS_ADDR"
	// EnvAPIAddr is where the coordination API listens. On a cloud node it
	// defaults to [node IPv6]:8081; in local node mode to [::1]:8081 (port
	// 0 picks a free port), where peers are found by port on loopback. A
	// non-loopback address in local node mode (local nodes with networks
	// of their own) serves there instead, advertises EnvNodeAddr (default:
	// the listen address) and dials peers at their advertised addresses,
	// as cloud nodes do; every local agent of the cluster must then do so.
	EnvAPIAddr = "PODMIN_AGENT_API_ADDR"
	// EnvNodeID overrides the node ID bound into the node's coordination
	// identity (default: the host name; in local node mode
	// local-<API port>).
	EnvNodeID = "PODMIN_AGENT_NODE_ID"
	// EnvNodeAddr overrides the node's global IPv6 address (default: the
	// first global address outside the Pod prefix; in local node mode the
	// documentation address 2001:db8::<API port>).
	EnvNodeAddr = "PODMIN_AGENT_NODE_ADDR"
	// EnvDataplane is auto (default: on for a cloud node running as root
	// on Linux, off in local node mode), on or off.
	EnvDataplane = "PODMIN_AGENT_DATAPLANE"
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
	// EnvDrain is how long a Pod whose endpoints a rollout slot withdrew
	// keeps running after every live node applied the withdrawal, so the
	// connections it has may finish (a Go duration, default 5s, at most
	// 10m; 0 replaces it at once).
	EnvDrain = "PODMIN_AGENT_DRAIN"
)

// Dataplane settings of Options.Dataplane.
const (
	DataplaneAuto = "auto"
	DataplaneOn   = "on"
	DataplaneOff  = "off"
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
	// DNSAddr is the loopback address of the Service DNS server; empty
	// serves none.
	DNSAddr string
	// APIAddr is the coordination API's listen address; empty means the
	// default of the provider.
	APIAddr string
	// NodeID and NodeAddr override the node's coordination identity.
	NodeID   string
	NodeAddr netip.Addr
	// Dataplane is DataplaneAuto, DataplaneOn or DataplaneOff.
	Dataplane string
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
	// SlotTimeout is how long the leader lets a node hold a rollout slot
	// before it reports the node stuck; zero means
	// coordinator.SlotTimeout.
	SlotTimeout time.Duration
	// ProbelessHold is how long kubelet must have reported a Pod with a
	// container without a readiness probe ready before the node reports it
	// ready; zero means coordinator.ProbelessHold, negative takes kubelet's
	// word at once.
	ProbelessHold time.Duration
	// RestartWindow spreads the restarts of Pods whose workload leaf is
	// replaced (workload.Options.RestartWindow); nil means the default.
	RestartWindow *time.Duration
	// Drain is how long a Pod whose endpoints a rollout slot withdrew
	// keeps running after every live node applied the withdrawal; zero
	// means coordinator.DefaultDrain, negative none.
	Drain time.Duration
}

// maxDrain bounds EnvDrain: a rollout waits the drain on every node.
const maxDrain = 10 * time.Minute

// OptionsFromEnv reads the environment variables above; unset ones get
// defaults.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	o := Options{Root: "/", HealthAddr: health.DefaultAddr, RegistryAddr: registry.DefaultAddress,
		PollInterval: DefaultPollInterval, TTLMargin: DefaultTTLMargin, DNSAddr: service.DefaultAddr,
		Dataplane: DataplaneAuto}
	var errs []error
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
	switch v := getenv(EnvDNSAddr); v {
	case "":
	case "off":
		o.DNSAddr = ""
	default:
		if ap, err := netip.ParseAddrPort(v); err != nil || !ap.Addr().IsLoopback() {
			errs = append(errs, fmt.Errorf("%s=%q is not a loopback address and port: Service DNS serves only 127.0.0.1 or [::1], e.g. 127.0.0.1:1053", EnvDNSAddr, v))
		}
		o.DNSAddr = v
	}
	if v := getenv(EnvAPIAddr); v != "" {
		if _, err := netip.ParseAddrPort(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not an address and port such as [::1]:18081", EnvAPIAddr, v))
		}
		o.APIAddr = v
	}
	if v := getenv(EnvNodeID); v != "" {
		o.NodeID = v
	}
	if v := getenv(EnvNodeAddr); v != "" {
		a, err := netip.ParseAddr(v)
		if err != nil || !a.Is6() || a.Is4In6() || !a.IsGlobalUnicast() || a.IsPrivate() || a.Zone() != "" {
			errs = append(errs, fmt.Errorf("%s=%q is not a global IPv6 address", EnvNodeAddr, v))
		}
		o.NodeAddr = a
	}
	switch v := getenv(EnvDataplane); v {
	case "", DataplaneAuto:
	case DataplaneOn, "1", "true":
		o.Dataplane = DataplaneOn
	case DataplaneOff, "0", "false":
		o.Dataplane = DataplaneOff
	default:
		errs = append(errs, fmt.Errorf("%s=%q is not auto, on or off", EnvDataplane, v))
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
	if v := getenv(EnvDrain); v != "" {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil || d < 0 || d > maxDrain:
			errs = append(errs, fmt.Errorf("%s=%q is not a duration from 0 to %s, such as 5s", EnvDrain, v, maxDrain))
		case d == 0:
			o.Drain = -1 // none
		default:
			o.Drain = d
		}
	}
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
