// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package dataplane programs the node's eBPF Service VIP forwarding: it
// loads the program from podmin.dev/podmin/bpf with its maps sized to the
// configured limits, compiles Service state (VIPs, ports and ready
// backends) into its maps with the fewest writes that reach the new
// state (Service and backend entries rewritten in place under their
// locks, so a packet never reads a half-recycled entry), attaches it with TCX at ingress on the Pod veths, the Pod ENI,
// the lowest-metric IPv6 default-route interface and the loopback device
// (where the ICMPv6 errors the node raises about NATed packets arrive),
// and keeps those attachments in step with the node's interfaces. It
// reports the program's counters (Stats: drops by reason, NAT port
// exhaustion by backend port) and NAT exhaustion as a health problem.
//
// With Config.PinPath on a bpf filesystem the program, its maps and its
// links are pinned, so Service traffic keeps flowing while the agent is
// down: a new Dataplane of the same generation (bpf.Generation: the
// compiled object, limits and load options) adopts the maps, the state
// they hold and the links; one of another generation leaves the old
// program forwarding on its own maps until its first Apply, then swaps
// its program into the old links in place and removes the old pins.
// Every new flow needs a live lease (Renew), which the agent ties to its
// leader's confirmations, so a dataplane left without an agent stops
// giving out backends once the lease window has passed; open flows keep
// theirs. Without a bpf filesystem it runs unpinned and PinProblem says
// so. With no Services anywhere the program is detached and no node
// address is needed. Stop leaves a pinned dataplane with Services
// attached for the next agent and otherwise detaches and releases
// everything; Remove and RemovePinned take it off the node. While
// Services exist, the source-NAT ports 30000-32767 are added to the
// namespace's reserved local ports.
//
// It must not select backends (Service selection and readiness belong to
// the caller), change routes or addresses, or write anything but its own
// maps, its links, its pin directory and that port reservation.
package dataplane
