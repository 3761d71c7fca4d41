// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package pki

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Lifetimes and windows of the specification's Workload Identity section.
const (
	// WorkloadCALifetime is the validity of each workload CA certificate.
	WorkloadCALifetime = 365 * 24 * time.Hour
	// RotateBefore is how long before the active CA expires the next one
	// is published as pending.
	RotateBefore = 30 * 24 * time.Hour
	// Propagation is the wait between publishing a pending CA and
	// promoting it.
	Propagation = 10 * time.Minute
	// RetainRetired is how long a retired CA stays in the bundle.
	RetainRetired = 30 * 24 * time.Hour
	// LeafLifetime is the validity of a workload leaf.
	LeafLifetime = 24 * time.Hour
	// RenewBefore is how long before expiry a leaf is renewed.
	RenewBefore = 6 * time.Hour
	// NodeLeafLifetime is the validity of a node coordination leaf.
	NodeLeafLifetime = 24 * time.Hour
	// ClusterCALifetime is the validity of the long-lived cluster
	// coordination CA; setup/destroy is its rotation lifecycle.
	ClusterCALifetime = 20 * 365 * 24 * time.Hour
)

// TrustDomain is the SPIFFE trust domain of a cluster:
// <cluster>.podmin.internal.
func TrustDomain(cluster string) string { return cluster + ".podmin.internal" }

// WorkloadURI is spiffe://<cluster>.podmin.internal/ns/<namespace>/pod/<pod>.
func WorkloadURI(cluster, namespace, pod string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: TrustDomain(cluster), Path: "/ns/" + namespace + "/pod/" + pod}
}

// ServiceDNSNames are the DNS names a Service's Pods serve:
// <svc>.<ns>.svc.cluster.local, <svc>.<ns>.svc and <svc>.<ns>. The bare
// Service name is deliberately absent: it is relative to the client's
// namespace and could name different Services.
func ServiceDNSNames(service, namespace string) []string {
	base := service + "." + namespace
	return []string{base + ".svc.cluster.local", base + ".svc", base}
}

// WorkloadLeaf is the leaf a Pod receives: CN = Pod name, its SPIFFE URI,
// client authentication always, and with a Service also server
// authentication and the Service's DNS names.
func WorkloadLeaf(cluster, namespace, pod, service string) LeafSpec {
	s := LeafSpec{
		CommonName: pod, URIs: []*url.URL{WorkloadURI(cluster, namespace, pod)},
		ClientAuth: true, Lifetime: LeafLifetime,
	}
	if service != "" {
		s.ServerAuth = true
		s.DNSNames = ServiceDNSNames(service, namespace)
	}
	return s
}

// NodeURI is the one SPIFFE URI of a node's coordination identity:
// spiffe://<cluster>.podmin.internal/nodegroup/<nodegroup>/node/<node-id>.
func NodeURI(cluster, nodeGroup, nodeID string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: TrustDomain(cluster), Path: "/nodegroup/" + nodeGroup + "/node/" + nodeID}
}

// ParseNodeURI returns the NodeGroup and node ID bound by a node URI of
// cluster.
func ParseNodeURI(u *url.URL, cluster string) (nodeGroup, nodeID string, err error) {
	bad := func(why string) (string, string, error) {
		return "", "", fmt.Errorf("%w: %q is not a node identity of cluster %s: %s", ErrInvalid, u, cluster, why)
	}
	if u.Scheme != "spiffe" || u.Host != TrustDomain(cluster) || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return bad("wrong scheme or trust domain")
	}
	parts := strings.Split(u.Path, "/")
	if len(parts) != 5 || parts[0] != "" || parts[1] != "nodegroup" || parts[3] != "node" || parts[2] == "" || parts[4] == "" {
		return bad("want /nodegroup/<nodegroup>/node/<node-id>")
	}
	return parts[2], parts[4], nil
}

// NodeLeaf is a node's coordination leaf: client and server
// authentication, the node's global IPv6 address as the only IP SAN and
// one SPIFFE URI binding cluster, node ID and NodeGroup.
func NodeLeaf(cluster, nodeGroup, nodeID string, addr netip.Addr) LeafSpec {
	return LeafSpec{
		CommonName: nodeID,
		URIs:       []*url.URL{NodeURI(cluster, nodeGroup, nodeID)},
		IPs:        []net.IP{net.IP(addr.AsSlice())},
		ClientAuth: true, ServerAuth: true,
		Lifetime: NodeLeafLifetime,
	}
}

// TelemetryURI is the URI SAN of a node's log-export client identity:
// spiffe://<cluster>.podmin.internal/system/otel-logs/node/<node-id>.
func TelemetryURI(cluster, nodeID string) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: TrustDomain(cluster), Path: "/system/otel-logs/node/" + nodeID}
}

// TelemetryLeaf is the 24-hour client-only leaf the agent issues Fluent
// Bit from the workload CA; it has no server authentication.
func TelemetryLeaf(cluster, nodeID string) LeafSpec {
	return LeafSpec{
		CommonName: "otel-logs." + nodeID,
		URIs:       []*url.URL{TelemetryURI(cluster, nodeID)},
		ClientAuth: true, Lifetime: LeafLifetime,
	}
}
