// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package service is the node's authoritative DNS for Services: it answers
// AAAA (and the AAAA content of ANY) for <service>.<namespace>.svc.cluster.local
// on 127.0.0.1:1053 over UDP and TCP with the Service's deterministic VIP
// (package vip) and a five-second TTL, and NXDOMAIN with the zone's SOA for
// unknown Services. Every update is also written as the zone file of the
// cluster domain (cluster.local), with the same records and SOA, from
// which the node's CoreDNS answers the whole domain itself: Service names
// resolve while the agent is down, and every other name of the domain
// (the longer forms a Pod's search list makes of a full name among them)
// is NXDOMAIN at once instead of going upstream. It renders the node's
// CoreDNS configuration, which does that and sends every other name to
// the provider resolver, and the search list of a Pod's resolv.conf.
//
// Its input is a list of Service identities (namespace, name, VIP), which the
// coordinator's Service snapshot feeds through Server.Update. The list carries
// no backends and no readiness: readiness changes never change DNS, and the
// identity set persisted for a restart cannot hold stale backends.
//
// It must not choose backends, talk to the bucket or the leader, or program
// the dataplane.
package service
