// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane_test

import (
	"context"
	"log/slog"
	"net/netip"
	"os/signal"
	"syscall"
	"time"

	"podmin.dev/podmin/agent/dataplane"
)

// The agent's composition: one Dataplane for the node, pinned so that it
// outlives the process, its lease renewed while a leader confirms the
// Services, Services applied whenever the ready set changes, Pods-watcher
// updates passed on as refresh hints, and SIGTERM ending Run, which
// leaves the pinned dataplane forwarding for the next agent.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()

	dp, err := dataplane.New(dataplane.Config{
		NodeAddr:  netip.MustParseAddr("2001:db8:ff::1"),      // the node's global IPv6 address
		PodPrefix: netip.MustParsePrefix("2001:db8:1:2::/80"), // --ipv6-prefix
		PinPath:   dataplane.DefaultPinPath,
		Log:       slog.Default(),
	})
	if err != nil {
		slog.Error("dataplane unavailable", "err", err)
		return
	}
	if err := dp.PinProblem(); err != nil {
		slog.Warn("a restart of this process interrupts Service traffic", "err", err)
	}
	go func() { _ = dp.Run(ctx) }()

	// While a leader confirms the Services (here: just now), for the
	// 35-second lease window:
	if err := dp.Renew(time.Now().Add(35 * time.Second)); err != nil {
		slog.Error("renew the lease", "err", err)
	}

	// From the Service snapshot and the ready Pods:
	err = dp.Apply(ctx, []dataplane.Service{{
		Namespace: "product", Name: "frontend",
		VIP:      netip.MustParseAddr("fd50:6f64:6d69::1"),
		Ports:    []dataplane.Port{{Protocol: dataplane.TCP, Port: 443, TargetPort: 8443}},
		Backends: []netip.Addr{netip.MustParseAddr("2001:db8:1:2::a")},
	}})
	if err != nil {
		slog.Error("apply Services", "err", err)
	}

	// From the Pods watcher's coalesced updates:
	dp.Refresh()
}
