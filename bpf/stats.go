// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

// Slots of the per-CPU "stats" map, in the order of vip.c's enum.
const (
	StatNewFlow      uint32 = iota // a flow was assigned a backend and NAT port
	StatForward                    // a packet to a VIP was forwarded
	StatReverse                    // a backend reply was reverse-NATed
	StatNoBackend                  // dropped: the Service has no ready backend
	StatNoService                  // dropped: the VIP has no Service on that port and protocol
	StatUnsupported                // dropped: fragment, extension header or non-TCP/UDP to a VIP
	StatNATExhausted               // dropped: no free NAT port within the probe limit
	StatNoFlow                     // dropped: a TCP segment other than SYN matched no flow
	StatCount                      // number of slots
)

// Limits the program's maps are created with; they are the spec's sizes.
const (
	MaxServices = 65536  // Service keys (VIP, port, protocol)
	MaxBackends = 65536  // backend entries over all Services
	MaxVIPs     = 65536  // VIPs
	MaxFlows    = 262144 // forward flows, and as many reverse flows
	NATPortMin  = 30000  // first source-NAT port
	NATPortMax  = 32767  // last source-NAT port
	NATProbes   = 32     // ports tried before a new flow is dropped
)
