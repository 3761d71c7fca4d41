// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"podmin.dev/podmin/agent/dataplane"
	"podmin.dev/podmin/agent/health"
	"podmin.dev/podmin/agent/identity"
	"podmin.dev/podmin/agent/service"
	"podmin.dev/podmin/internal/objstore"
)

// Environment variables of the agent that place the node in cluster
// coordination; the agent reads them, errors here name them.
const (
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
	// EnvDrain is how long a Pod whose endpoints a rollout slot withdrew
	// keeps running after every live node applied the withdrawal, so the
	// connections it has may finish (a Go duration, default 5s, at most
	// 10m; 0 replaces it at once).
	EnvDrain = "PODMIN_AGENT_DRAIN"
)

// Dataplane settings of NodeOptions.Dataplane.
const (
	DataplaneAuto = "auto"
	DataplaneOn   = "on"
	DataplaneOff  = "off"
)

// Settings are the agent's settings of the node's coordination, from its
// environment (SettingsFromEnv); the agent's Options embed them.
type Settings struct {
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
	// SlotTimeout is how long the leader lets a node hold a rollout slot
	// before it reports the node stuck; zero means SlotTimeout.
	SlotTimeout time.Duration
	// ProbelessHold is how long kubelet must have reported a Pod with a
	// container without a readiness probe ready before the node reports it
	// ready; zero means ProbelessHold, negative takes kubelet's word at
	// once.
	ProbelessHold time.Duration
	// Drain is how long a Pod whose endpoints a rollout slot withdrew
	// keeps running after every live node applied the withdrawal; zero
	// means DefaultDrain, negative none.
	Drain time.Duration
	// NewDataplane loads the dataplane; nil means dataplane.New (tests
	// stand in for the kernel).
	NewDataplane func(dataplane.Config) (Dataplane, error)
}

// maxDrain bounds EnvDrain: a rollout waits the drain on every node.
const maxDrain = 10 * time.Minute

// SettingsFromEnv reads EnvDNSAddr, EnvAPIAddr, EnvNodeID, EnvNodeAddr,
// EnvDataplane and EnvDrain; unset ones get defaults. It names every
// invalid one.
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	s := Settings{DNSAddr: service.DefaultAddr, Dataplane: DataplaneAuto}
	var errs []error
	switch v := getenv(EnvDNSAddr); v {
	case "":
	case "off":
		s.DNSAddr = ""
	default:
		if ap, err := netip.ParseAddrPort(v); err != nil || !ap.Addr().IsLoopback() {
			errs = append(errs, fmt.Errorf("%s=%q is not a loopback address and port: Service DNS serves only 127.0.0.1 or [::1], e.g. 127.0.0.1:1053", EnvDNSAddr, v))
		}
		s.DNSAddr = v
	}
	if v := getenv(EnvAPIAddr); v != "" {
		if _, err := netip.ParseAddrPort(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not an address and port such as [::1]:18081", EnvAPIAddr, v))
		}
		s.APIAddr = v
	}
	s.NodeID = getenv(EnvNodeID)
	if v := getenv(EnvNodeAddr); v != "" {
		a, err := netip.ParseAddr(v)
		if err != nil || !a.Is6() || a.Is4In6() || !a.IsGlobalUnicast() || a.IsPrivate() || a.Zone() != "" {
			errs = append(errs, fmt.Errorf("%s=%q is not a global IPv6 address", EnvNodeAddr, v))
		}
		s.NodeAddr = a
	}
	switch v := getenv(EnvDataplane); v {
	case "", DataplaneAuto:
	case DataplaneOn, "1", "true":
		s.Dataplane = DataplaneOn
	case DataplaneOff, "0", "false":
		s.Dataplane = DataplaneOff
	default:
		errs = append(errs, fmt.Errorf("%s=%q is not auto, on or off", EnvDataplane, v))
	}
	if v := getenv(EnvDrain); v != "" {
		d, err := time.ParseDuration(v)
		switch {
		case err != nil || d < 0 || d > maxDrain:
			errs = append(errs, fmt.Errorf("%s=%q is not a duration from 0 to %s, such as 5s", EnvDrain, v, maxDrain))
		case d == 0:
			s.Drain = -1 // none
		default:
			s.Drain = d
		}
	}
	return s, errors.Join(errs...)
}

// NodeOptions are what the node's coordination needs of the agent.
type NodeOptions struct {
	Settings
	Cluster, NodeGroup string
	// PodPrefix is the node's Pod /80.
	PodPrefix netip.Prefix
	// Local is set in local node mode.
	Local bool
	// Root is the node root every host path hangs off.
	Root string
	// Secrets is the provider's system store holding the cluster CA; nil
	// disables coordination.
	Secrets identity.SecretReader
	Store   objstore.Bucket
	// Kubelet is set when a kubelet serves this node's Pods API.
	Kubelet bool
	// NodeRegistry is Options.NodeRegistry: the node registry's address
	// while this agent serves it.
	NodeRegistry func() string
	// Health receives the reasons the node is not ready.
	Health *health.Health
	Log    *slog.Logger
}

func (o *NodeOptions) defaults() {
	if o.Health == nil {
		o.Health = health.NewHealth()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.NewDataplane == nil {
		o.NewDataplane = func(cfg dataplane.Config) (Dataplane, error) { return dataplane.New(cfg) }
	}
}
