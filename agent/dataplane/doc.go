// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package dataplane programs the node's eBPF Service VIP forwarding: it
// loads the program from podmin.dev/podmin/bpf with its maps sized to the
// configured limits, compiles Service state (VIPs, ports and ready
// backends) into its maps with the fewest writes that reach the new
// state, attaches it with TCX at ingress on the Pod veths, the Pod ENI,
// the lowest-metric IPv6 default-route interface and the loopback device
// (where the ICMPv6 errors the node raises about NATed packets arrive),
// and keeps those attachments in step with the node's interfaces. It
// reports the program's counters (Stats: drops by reason, NAT port
// exhaustion by backend port) and NAT exhaustion as a health problem.
//
// Links are never pinned: they go away with the process. With no Services
// anywhere the program is detached and no node address is needed. Stop
// detaches and releases everything. While Services exist, the source-NAT
// ports 30000-32767 are added to the namespace's reserved local ports.
//
// It must not select backends (Service selection and readiness belong to
// the caller), change routes or addresses, or write anything but its own
// maps, its links and that port reservation.
package dataplane
