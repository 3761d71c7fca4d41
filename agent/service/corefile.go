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
	// ZoneFile is the zone file of the cluster domain the agent keeps
	// (Config.ZonePath); empty means DefaultZonePath.
	ZoneFile string
	// Upstreams are the resolvers for every other name: addresses
	// (optionally with a port) or a resolv.conf path; empty means
	// DefaultUpstream.
	Upstreams []string
}

// corefileFormat is the Corefile; its arguments are the cluster domain,
// port, bind address, zone file, its reload interval, port again, bind
// address again and the upstreams. It is a format, not a text/template: a
// program that can reach text/template's executor keeps every exported
// method of every type it links, which would grow the agent every node
// downloads by megabytes.
//
// CoreDNS answers the whole cluster domain from the zone file the agent
// keeps: Service names, and NXDOMAIN with the zone's SOA for every other
// name in it (the search list's longer forms of a full name among them),
// so nothing of the cluster domain goes upstream and the names resolve
// while the agent restarts.
const corefileFormat = `# CoreDNS of a Podmin node, rendered by podmin-agent.
# The cluster domain is answered from the zone file the agent keeps, so
# Service names resolve while the agent restarts and no name of the domain
# goes upstream; every other name goes to the provider's resolver.
%s:%d {
    bind %s
    file %s {
        reload %s
    }
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
	if len(c.Upstreams) == 0 {
		c.Upstreams = []string{DefaultUpstream}
	}
	if c.ZoneFile == "" {
		c.ZoneFile = DefaultZonePath
	}
	if !strings.HasPrefix(c.ZoneFile, "/") || strings.ContainsAny(c.ZoneFile, " \t\n{}#\"") {
		return nil, fmt.Errorf("zone file %q is not a plain absolute path", c.ZoneFile)
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
	return fmt.Appendf(nil, corefileFormat, ClusterDomain, c.Port, c.Bind, c.ZoneFile, ZoneReload, c.Port, c.Bind, strings.Join(c.Upstreams, " ")), nil
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
