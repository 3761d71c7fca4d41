// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package service

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultUpstream is where CoreDNS sends names outside svc.cluster.local:
// the resolvers the operating system received from the provider.
const DefaultUpstream = "/etc/resolv.conf"

// CorefileConfig describes one node's CoreDNS.
type CorefileConfig struct {
	// Bind is the node's global IPv6 address, the DNS server kubelet gives
	// every Pod. The local node mode binds a loopback address instead.
	Bind netip.Addr
	// Port is the listening port; 0 means 53.
	Port uint16
	// Agent is the agent's authoritative server; the zero value means
	// DefaultAddr.
	Agent netip.AddrPort
	// Hosts is the hosts file the agent keeps (Config.HostsPath), from
	// which CoreDNS answers Service names itself; empty means
	// DefaultHostsPath.
	Hosts string
	// Upstreams are the resolvers for every other name: addresses
	// (optionally with a port) or a resolv.conf path; empty means
	// DefaultUpstream.
	Upstreams []string
}

// corefileFormat is the Corefile; its arguments are the zone, port, bind
// address, hosts file, its TTL, its reload interval, agent address, port
// again, bind address again and the upstreams. It is a format, not a
// text/template: a program that can reach text/template's executor keeps
// every exported method of every type it links, which would grow the
// agent every node downloads by megabytes.
//
// The hosts plugin answers the AAAA queries of the Services in the file,
// so they resolve while the agent restarts; every other query in the zone
// (an unknown Service, whose NXDOMAIN is the agent's to give, another
// type) falls through to the agent.
const corefileFormat = `# CoreDNS of a Podmin node, rendered by podmin-agent.
# Service names are answered from the hosts file the agent keeps, so they
# resolve while the agent restarts, and otherwise by the agent's
# authoritative server; every other name goes to the provider's resolver.
%s:%d {
    bind %s
    hosts %s {
        ttl %d
        reload %s
        no_reverse
        fallthrough
        fallthrough_unsupported
    }
    forward . %s
    errors
}
.:%d {
    bind %s
    forward . %s
    cache 30
    loop
    errors
}
`

// RenderCorefile returns the node's Corefile.
func RenderCorefile(c CorefileConfig) ([]byte, error) {
	if !c.Bind.Is6() || c.Bind.Is4In6() || c.Bind.Zone() != "" || c.Bind.IsUnspecified() || c.Bind.IsMulticast() {
		return nil, fmt.Errorf("CoreDNS bind address %v is not a unicast IPv6 address: pass the node's global IPv6 address", c.Bind)
	}
	if c.Port == 0 {
		c.Port = 53
	}
	if !c.Agent.IsValid() {
		c.Agent = netip.MustParseAddrPort(DefaultAddr)
	}
	if len(c.Upstreams) == 0 {
		c.Upstreams = []string{DefaultUpstream}
	}
	if c.Hosts == "" {
		c.Hosts = DefaultHostsPath
	}
	if !strings.HasPrefix(c.Hosts, "/") || strings.ContainsAny(c.Hosts, " \t\n{}#\"") {
		return nil, fmt.Errorf("hosts file %q is not a plain absolute path", c.Hosts)
	}
	for _, u := range c.Upstreams {
		if strings.HasPrefix(u, "/") {
			if strings.ContainsAny(u, " \t\n{}#\"") {
				return nil, fmt.Errorf("upstream %q is not a plain resolv.conf path", u)
			}
			continue
		}
		if _, err := netip.ParseAddr(u); err == nil {
			continue
		}
		if _, err := netip.ParseAddrPort(u); err == nil {
			continue
		}
		return nil, fmt.Errorf("upstream %q is neither an IP address, an address:port nor a resolv.conf path", u)
	}
	zone := strings.TrimSuffix(Zone, ".")
	return fmt.Appendf(nil, corefileFormat, zone, c.Port, c.Bind, c.Hosts, TTL, HostsReload, c.Agent, c.Port, c.Bind, strings.Join(c.Upstreams, " ")), nil
}

// SearchList is the DNS search list of a Pod in namespace, most specific
// first, so "database", "database.product" and the full name all resolve
// from a Pod in product.
func SearchList(namespace string) []string {
	return []string{namespace + "." + strings.TrimSuffix(Zone, "."), strings.TrimSuffix(Zone, "."), ClusterDomain}
}

// RenderResolvConf returns the resolv.conf of a Pod in namespace whose DNS
// server is nameserver (the node's CoreDNS). ndots:5 makes every name with
// fewer than five dots try the search list first, as Kubernetes does.
func RenderResolvConf(nameserver netip.Addr, namespace string) ([]byte, error) {
	if !nameserver.IsValid() || nameserver.IsUnspecified() {
		return nil, fmt.Errorf("nameserver %v is not an address: pass the node's global IPv6 address", nameserver)
	}
	if len(validation.IsDNS1123Label(namespace)) > 0 {
		return nil, fmt.Errorf("%q is not a valid Pod namespace: %s", namespace, labelHint)
	}
	return fmt.Appendf(nil, "search %s\nnameserver %s\noptions ndots:5\n", strings.Join(SearchList(namespace), " "), nameserver), nil
}
