// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

// Slots of the per-CPU "stats" map, in the order of vip.c's enum.
const (
	StatNewFlow         uint32 = iota // a flow was assigned a backend and NAT port
	StatForward                       // a packet to a VIP was forwarded
	StatReverse                       // a backend reply was reverse-NATed
	StatRepaired                      // a flow whose forward or reverse entry was evicted was rebuilt
	StatICMPTranslated                // an ICMPv6 error about a NATed packet was translated
	StatNoBackend                     // dropped: the Service has no ready backend
	StatNoService                     // dropped: the VIP has no Service on that port and protocol
	StatNATExhausted                  // dropped: no free NAT port within the probe limit
	StatNoFlow                        // dropped: a TCP segment other than SYN matched no flow
	StatFragment                      // dropped: an IPv6 fragment to a VIP (a datagram larger than the path MTU)
	StatExtensionHeader               // dropped: an extension header before TCP/UDP to a VIP
	StatProtocol                      // dropped: a protocol other than TCP, UDP or ICMPv6 errors to a VIP
	StatTruncated                     // dropped: headers cut short, to a VIP
	StatICMPNoFlow                    // dropped: an ICMPv6 error to a VIP about no known flow
	StatRewriteFailed                 // dropped: the kernel refused a rewrite (a helper failed)
	StatLeaseExpired                  // dropped: a new flow while the agent's lease in config has lapsed
	StatCount                         // number of slots
)

// Source NAT and its port range, as vip.c has them.
const (
	NATPortMin = 30000 // first source-NAT port
	NATPortMax = 32767 // last source-NAT port
	NATProbes  = 32    // ports tried before a new flow is dropped
	// NATExhaustedEntries bounds the table of backend ports that ran out
	// of NAT ports.
	NATExhaustedEntries = 256
)
